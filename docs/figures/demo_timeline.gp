# gnuplot script for docs/release.md: device memory over the whole demo.
#   gnuplot docs/figures/demo_timeline.gp          (from the repository root)
# Input: docs/figures/demo_timeline.csv, written by
#   ccrun --demo --timeline docs/figures/demo_timeline.csv   (simulated device, 1 GiB)
set datafile separator ','
set terminal pngcairo size 1000,520 font 'Helvetica,11'
set output 'docs/figures/demo_timeline.png'
MiB = 1048576.0
set title "ccrun --demo, SIMULATED 1 GiB device: 1 greedy+keep-cache | 2 growth+trim | 2x expandable+trim | 3 release each | 4 domains | 5 sleep/wake" font ",10"
set xlabel 'time (s)'
set ylabel 'MiB'
set yrange [0:1100]
set key outside bottom center horizontal
set grid
plot 'docs/figures/demo_timeline.csv' using ($1/1000):(1024 - $9/MiB) with steps lw 3 lc rgb '#7a1fa2' title 'device used (capacity - free)', \
     '' using ($1/1000):($8/MiB) with steps lw 1.5 dt 2 lc rgb '#1b9e77' title 'reserved by the allocator', \
     '' using ($1/1000):($7/MiB) with steps lw 1.5 lc rgb '#e66101' title 'allocated (live: weights + activations)', \
     '' using ($1/1000):(stringcolumn(5) eq 'create' ? 1080 : 1/0) with impulses lc rgb '#888888' notitle, \
     '' using ($1/1000):(stringcolumn(5) eq 'create' ? 1060 : 1/0):("new engine") with labels left offset 0.3,0 font ',9' notitle
