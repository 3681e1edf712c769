#!/usr/bin/env python3
"""A trace with many domains: N declared up front, then R alloc/free pairs of
4 KiB cycling through the last ten domains declared (the worst place for a
handle check that walks the domain list). Usage: gen_domains.py N R > t.csv"""
import sys

n, r = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout
out.write("# ccalloc trace v3\nseq,op,id,size,stream,domain,name\n")
seq = 0
for d in range(1, n + 1):
    out.write(f"{seq},domain,0,0,0,{d},m{d}\n")
    seq += 1
for i in range(1, r + 1):
    d = n - (i - 1) % 10
    out.write(f"{seq},alloc,{i},4096,0,{d}\n{seq + 1},free,{i},4096,0,{d}\n")
    seq += 2
