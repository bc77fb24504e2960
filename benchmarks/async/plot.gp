# gnuplot -e "summary='summary.csv'; output='async_bench.png'" plot.gp
set terminal pngcairo size 1400,560 font ",10"
set output output
set datafile separator ","
set key outside bottom center horizontal maxrows 2
set grid
set xlabel "workers W (ranks = W for synchronous, W + masters for async; > 2 ranks oversubscribe 2 cores)"
set xtics 1
series = "collective ring async\\ M=1\\ s=0 async\\ M=1\\ s=4 async\\ M=1\\ s=inf async\\ M=2\\ s=0 async\\ M=2\\ s=4 async\\ M=2\\ s=inf"
names = "collective|ring|async M=1 s=0|async M=1 s=4|async M=1 s=inf|async M=2 s=0|async M=2 s=4|async M=2 s=inf"
name(i) = (i==1?"collective":i==2?"ring":i==3?"async M=1 s=0":i==4?"async M=1 s=4":i==5?"async M=1 s=inf":i==6?"async M=2 s=0":i==7?"async M=2 s=4":"async M=2 s=inf")
set multiplot layout 1,2 title "Synchronous vs asynchronous training (MLP 32-128-128-10, synthetic 10 classes), medians"
set ylabel "samples/s (all workers)"
set logscale y
plot for [i=1:8] summary using ((strcol(1) eq name(i)) ? $2 : 1/0):5 with linespoints lw 2 title name(i)
unset logscale y
set ylabel "test accuracy"
set yrange [*:*]
plot for [i=1:8] summary using ((strcol(1) eq name(i)) ? $2 : 1/0):6 with linespoints lw 2 title name(i)
unset multiplot
