# gnuplot script for docs/engine.md: the timeline of one ccrun invocation.
#   gnuplot docs/figures/engine_timeline.gp        (from the repository root)
# Input: docs/figures/engine_timeline.csv, written by
#   ccrun --device host --capacity 256M --batch 512 --iters 3 --no-domains \
#         --timeline docs/figures/engine_timeline.csv \
#         mlp:256x2048x2048x256x10:relu:softmax mlp:256x1024x1024x1024x10:gelu:softmax
set datafile separator ','
set terminal pngcairo size 1000,760 font 'Helvetica,11'
set output 'docs/figures/engine_timeline.png'
set multiplot layout 2,1
MiB = 1048576.0

set title "ccrun on the SIMULATED device (256 MiB): two models, each loaded, run 3 x batch 512, unloaded, released"
set xlabel 'time (s)'
set ylabel 'MiB'
set key top right
set grid
plot 'docs/figures/engine_timeline.csv' using ($1/1000):($8/MiB) with steps lw 2 title 'reserved (allocator)', \
     '' using ($1/1000):($7/MiB) with steps lw 2 title 'allocated (live blocks)', \
     '' using ($1/1000):((268435456 - $9)/MiB) with points pt 6 ps 0.6 title 'device used = capacity - free (each event)'

set title "one forward pass of model 1 (batch 512), event by event: live activations = allocated - weights (20.03 MiB)"
set xlabel 'event number (line of the CSV minus 1; the pass starts at 12 and ends at 24)'
set ylabel 'MiB of activations'
set xrange [10.5:24.5]
set yrange [0:9.5]
set xtics 1
first(x) = ($0 >= 11 && $0 <= 24) ? x : 1/0
plot 'docs/figures/engine_timeline.csv' using 0:(first(($7 - 20999680)/MiB)) with steps lw 2 title 'live activations', \
     '' using 0:(stringcolumn(2) eq 'alloc' ? first(($7 - 20999680)/MiB + 0.35) : 1/0):(sprintf('+%s %.2f MiB', stringcolumn(5), $6/MiB)) \
        with labels center font ',9' notitle, \
     '' using 0:(stringcolumn(2) eq 'free' ? first(($7 - 20999680)/MiB - 0.35) : 1/0):(sprintf('-%s', stringcolumn(5))) \
        with labels center font ',9' textcolor rgb '#aa0000' notitle
unset multiplot
