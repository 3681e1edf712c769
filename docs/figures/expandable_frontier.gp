# gnuplot script written by docs/figures/expandable_frontier.py (run that, not this)
set terminal pngcairo size 1100,420 font 'Helvetica,11'
set output 'docs/figures/expandable_frontier.png'
set multiplot layout 1,2 title "Expandable segments, every setting: peak reserved / live peak against upstream calls (SIMULATED device; green: both targets)"
set logscale x
set xrange [5:1500]
set yrange [0.95:1.5]
set xlabel 'upstream calls (log scale)'
set ylabel 'peak reserved / live peak'
set grid
set title "lognormal: RMM's pool 13 calls (issue 12's figure), target <= 19.5"
set object 1 rect from graph 0, first 0.95 to first 19.5, first 1.05 fc rgb '#d9f0d3' fs solid 0.6 noborder behind
plot 'docs/figures/expandable_frontier.dat' index 0 using 1:2 with points pt 7 ps 1.2 lc rgb '#2166ac' notitle, \
     'docs/figures/expandable_frontier.dat' index 0 using 1:($2+$4):3 with labels offset 0.8,0 left font ',9' notitle
unset object 1
set title "torch-train-step: RMM's pool 8 calls (issue 12's figure), target <= 12"
set object 1 rect from graph 0, first 0.95 to first 12, first 1.05 fc rgb '#d9f0d3' fs solid 0.6 noborder behind
plot 'docs/figures/expandable_frontier.dat' index 1 using 1:2 with points pt 7 ps 1.2 lc rgb '#2166ac' notitle, \
     'docs/figures/expandable_frontier.dat' index 1 using 1:($2+$4):3 with labels offset 0.8,0 left font ',9' notitle
unset object 1
unset multiplot
