set terminal pngcairo size 1400,1040 font 'sans,11'
set output 'bench/results/async/busbw.png'
set multiplot layout 2,2 title 'busbw (GB/s) vs message size, float32 sum (median; higher is better)'
set logscale x 2
set logscale y 10
set grid
set key left top font ',9' noenhanced
set format x '%.0b%B'
set xlabel 'message size (bytes)'
set ylabel 'busbw (GB/s)'
set title 'allreduce, 2 ranks' noenhanced
plot 'bench/results/async/allreduce.np2.dat' using 1:2 with linespoints lw 3 lc rgb '#d62728' pt 7 ps 0.6 title 'tcp-shm', \
     'bench/results/async/allreduce.np2.dat' using 1:3 with linespoints lw 3 lc rgb '#d62728' dt 3 pt 7 ps 0.6 title 'tcp-shm-async', \
     'bench/results/async/allreduce.np2.dat' using 1:4 with linespoints lw 3 lc rgb '#1f77b4' pt 7 ps 0.6 title 'mpi-native', \
     'bench/results/async/allreduce.np2.dat' using 1:5 with linespoints lw 3 lc rgb '#1f77b4' dt 3 pt 7 ps 0.6 title 'mpi-native-async'
set title 'allreduce, 4 ranks' noenhanced
plot 'bench/results/async/allreduce.np4.dat' using 1:2 with linespoints lw 3 lc rgb '#d62728' pt 7 ps 0.6 title 'tcp-shm', \
     'bench/results/async/allreduce.np4.dat' using 1:3 with linespoints lw 3 lc rgb '#d62728' dt 3 pt 7 ps 0.6 title 'tcp-shm-async', \
     'bench/results/async/allreduce.np4.dat' using 1:4 with linespoints lw 3 lc rgb '#1f77b4' pt 7 ps 0.6 title 'mpi-native', \
     'bench/results/async/allreduce.np4.dat' using 1:5 with linespoints lw 3 lc rgb '#1f77b4' dt 3 pt 7 ps 0.6 title 'mpi-native-async'
set title 'reduce_scatter, 2 ranks' noenhanced
plot 'bench/results/async/reduce_scatter.np2.dat' using 1:2 with linespoints lw 3 lc rgb '#d62728' pt 7 ps 0.6 title 'tcp-shm', \
     'bench/results/async/reduce_scatter.np2.dat' using 1:3 with linespoints lw 3 lc rgb '#d62728' dt 3 pt 7 ps 0.6 title 'tcp-shm-async', \
     'bench/results/async/reduce_scatter.np2.dat' using 1:4 with linespoints lw 3 lc rgb '#1f77b4' pt 7 ps 0.6 title 'mpi-native', \
     'bench/results/async/reduce_scatter.np2.dat' using 1:5 with linespoints lw 3 lc rgb '#1f77b4' dt 3 pt 7 ps 0.6 title 'mpi-native-async'
set title 'reduce_scatter, 4 ranks' noenhanced
plot 'bench/results/async/reduce_scatter.np4.dat' using 1:2 with linespoints lw 3 lc rgb '#d62728' pt 7 ps 0.6 title 'tcp-shm', \
     'bench/results/async/reduce_scatter.np4.dat' using 1:3 with linespoints lw 3 lc rgb '#d62728' dt 3 pt 7 ps 0.6 title 'tcp-shm-async', \
     'bench/results/async/reduce_scatter.np4.dat' using 1:4 with linespoints lw 3 lc rgb '#1f77b4' pt 7 ps 0.6 title 'mpi-native', \
     'bench/results/async/reduce_scatter.np4.dat' using 1:5 with linespoints lw 3 lc rgb '#1f77b4' dt 3 pt 7 ps 0.6 title 'mpi-native-async'
unset multiplot
