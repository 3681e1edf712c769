/*
 * huge_chase.c — the latency of a dependent load over MB of memory (a
 * random cyclic pointer chase, one pointer per 64-byte line), with the
 * memory advised MADV_NOHUGEPAGE (HUGE=0) or MADV_HUGEPAGE (HUGE=1).
 *
 *   cc -O2 huge_chase.c -o huge_chase && for mb in 1 4 16 32; do ./huge_chase $mb 0; ./huge_chase $mb 1; done
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(int argc,char**argv){
  size_t mb=atol(argv[1]); int huge=atoi(argv[2]); size_t bytes=mb<<20, n=bytes/64;
  char *p=mmap(0,bytes+(2<<20),PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  p=(char*)(((uintptr_t)p+(2<<20)-1)&~(uintptr_t)((2<<20)-1));
  madvise(p,bytes,huge?MADV_HUGEPAGE:MADV_NOHUGEPAGE);
  size_t *perm=malloc(n*sizeof *perm); for(size_t i=0;i<n;i++)perm[i]=i;
  srand(1); for(size_t i=n-1;i>0;i--){size_t j=((size_t)rand()*RAND_MAX+rand())%(i+1); size_t t=perm[i];perm[i]=perm[j];perm[j]=t;}
  for(size_t i=0;i<n;i++) *(char**)(p+perm[i]*64)=p+perm[(i+1)%n]*64;
  char *q=p; long steps=20000000; double t0=now();
  for(long i=0;i<steps;i++) q=*(char**)q;
  long hp=-1; char line[256]; FILE *f=fopen("/proc/self/smaps_rollup","r");
  while(f&&fgets(line,sizeof line,f)) if(sscanf(line,"AnonHugePages: %ld",&hp)==1) break;
  if(f) fclose(f);
  printf("%zu MB huge=%d: %.1f ns/load (AnonHugePages %ld kB) %p\n",mb,huge,(now()-t0)/steps,hp,(void*)q);
}
