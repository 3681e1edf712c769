# timeline.gp — memory over a trace, one panel per strategy.
#   gnuplot -c timeline.gp OUT.png "TITLE" "file1.csv file2.csv ..." "label1 label2 ..."
# Each CSV (written by ccbench): op,requested_mib,allocated_mib,reserved_mib,
# values the maximum over a window of events. reserved = NaN when unknown.
out = ARG1; ttl = ARG2; files = ARG3; labels = ARG4
n = words(files)
cols = (n <= 2) ? n : (n <= 4 ? 2 : 3)
rows = int(ceil(n / real(cols)))
set terminal pngcairo size (cols * 560), (rows * 330 + 40) font "sans,9"
set output out
set datafile separator ","
set key top left box opaque
set grid
set xlabel "event"
set ylabel "MiB"
set multiplot layout rows, cols title ttl font "sans,11"
do for [i = 1:n] {
  f = word(files, i)
  set title word(labels, i)
  plot f using 1:4 skip 2 with steps lw 2 lc rgb "#d62728" title "reserved", \
       f using 1:3 skip 2 with steps lw 1.5 lc rgb "#1f77b4" title "allocated", \
       f using 1:2 skip 2 with steps lw 1 dt 2 lc rgb "#2ca02c" title "requested"
}
unset multiplot
