# ratios.gp — peak reserved / peak allocated, traces x strategies.
#   gnuplot -c ratios.gp ratios.dat OUT.png NCOLS
# ratios.dat (written by ccbench): a header line "trace strat1 strat2 ...",
# then one row per trace; NaN where a strategy cannot know reserved bytes.
dat = ARG1; out = ARG2; ncols = int(ARG3)
set terminal pngcairo size 1000, 480 font "sans,9"
set output out
set title "peak reserved / peak allocated (lower is better; 1 = no waste; log scale)"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set yrange [0.9:*]
set grid ytics
set key outside right top
set xtics rotate by -20
set datafile missing "NaN"
plot for [i = 2:ncols] dat using i:xtic(1) title columnheader(i)
