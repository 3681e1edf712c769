# kernels_cpu.gp — the host kernels from a cck_bench CSV, two panels:
# softmax bandwidth next to memcpy of the same bytes, and the dense layer's
# GEMM throughput, built-in blocked loop vs the library GEMM.
#   gnuplot -c kernels_cpu.gp cck_bench_cpu.csv OUT.png
# Rows used (written by cck_bench): kind cpu; op copy / softmax (gbps, col 15)
# and op dense with version gemm-blocked / gemm (gflops, col 17).
csv = ARG1; out = ARG2
set terminal pngcairo size 1000, 400 font "sans,9"
set output out
set datafile separator ","
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key top left box opaque
set multiplot layout 1, 2
# shapes as "rows x cols" / "batch x in x out" labels, via awk (quoted fields
# in column 1 hold no comma here: the CPU name is the only quoted field)
set title "host softmax vs memcpy (GB/s, 2 threads)"
set ylabel "GB/s"
set yrange [0:*]
set offsets 0, 0, graph 0.25, 0
plot "< awk -F, '$3==\"copy\"{c[$6]=$15} $3==\"softmax\"{print $5\"x\"$6\",\"c[$6]\",\"$15}' ".csv \
       using 2:xtic(1) title "memcpy" lc rgb "#7f7f7f", \
     "" using 3 title "softmax (host)" lc rgb "#1f77b4"
set title "host GEMM y = x·Wᵀ (GFLOP/s, 2 threads, log scale)"
set ylabel "GFLOP/s"
set logscale y
set yrange [5:3000]
set offsets 0, 0, 0, 0
plot "< awk -F, '$3==\"dense\" && $4==\"gemm-blocked\"{b[$7\"x\"$8\"x\"$9]=$17} $3==\"dense\" && $4==\"gemm\"{k=$7\"x\"$8\"x\"$9; print k\",\"b[k]\",\"$17}' ".csv \
       using 2:xtic(1) title "blocked C loop" lc rgb "#ff7f0e", \
     "" using 3 title "OpenBLAS" lc rgb "#2ca02c"
unset multiplot
