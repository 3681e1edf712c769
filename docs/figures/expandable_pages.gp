# gnuplot script written by docs/figures/expandable_pages.py (run that, not this)
set terminal pngcairo size 1100,360 font 'Helvetica,11'
set output 'docs/figures/expandable_pages.png'
set title "torch-train-step.csv.gz at 13%: the large pool's expandable segment, before and after trim(0) (SIMULATED device)"
set xlabel 'MiB from the start of the segment (to its mapped end)'
set xrange [0:1730.0]
set yrange [-0.2:5.2]
set ytics ("pages after" 0.5, "blocks after" 1.5, "pages before" 3.0, "blocks before" 4.0)
set key outside bottom center horizontal
set style fill solid 1.0 noborder
plot 'docs/figures/expandable_pages.dat' using 1:2:3:4:5:6:7 with boxxy lc rgb variable notitle, \
     NaN with boxes lc rgb '#e66101' title 'live block', \
     NaN with boxes lc rgb '#d9d9d9' title 'free block', \
     NaN with boxes lc rgb '#7a1fa2' title 'mapped page (white: unmapped)'
