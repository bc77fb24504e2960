# Bus bandwidth of the all-reduce algorithms against message size, from allreduce_bench's CSV.
#   gnuplot -e "csv='allreduce_np2.csv'; out='allreduce_np2.png'" plot_allreduce.gp
if (!exists("csv")) csv = 'allreduce_np2.csv'
if (!exists("out")) out = 'allreduce_np2.png'
set terminal pngcairo size 900,560 font ",11" noenhanced
set output out
set datafile separator ","
set logscale x 2
set logscale y 10
set format x "%.0b%B"
set xlabel "message size (bytes)"
set ylabel "bus bandwidth (GB/s), median"
set title sprintf("All-reduce of float buffers (%s)", csv) noenhanced
set key bottom right
set grid
series(a) = sprintf("< grep '^%s,' '%s'", a, csv)
plot series("ring") using 3:9 with linespoints lw 2 pt 7 title "Ring (pipelined, dtrain)", \
     series("collective") using 3:9 with linespoints lw 2 pt 5 title "Collective (MPICH in-place MPI_Allreduce)", \
     series("naive") using 3:9 with linespoints lw 2 pt 9 title "Naive (all-to-all, rank order)"
