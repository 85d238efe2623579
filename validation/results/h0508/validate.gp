# predicted vs measured, one colour per group (odsim validation/plot.c)
set logscale xy
set xlabel 'measured p50 (us; bars: measured p10..p90)'
set ylabel 'predicted p50 (us; bars: measured p10..p90)'
set key left top font ',8'
set grid
set size square
f(x) = x
set terminal svg size 900,900 dynamic noenhanced
set output 'validation/results/h0508/validate.svg'
plot f(x) title 'predicted = measured' lt -1, f(x)*1.15 title '+-15%' dt 2 lc rgb 'gray', f(x)/1.15 notitle dt 2 lc rgb 'gray', 'validation/results/h0508/validate.dat' index 0 using 1:4:2:3 with xerrorbars pt 7 ps 0.6 title 'concurrency:procs', 'validation/results/h0508/validate.dat' index 1 using 1:4:2:3 with xerrorbars pt 7 ps 0.6 title 'concurrency:streams', 'validation/results/h0508/validate.dat' index 2 using 1:4:2:3 with xerrorbars pt 7 ps 0.6 title 'context', 'validation/results/h0508/validate.dat' index 3 using 1:4:2:3 with xerrorbars pt 7 ps 0.6 title 'step', 'validation/results/h0508/validate.dat' index 4 using 1:4:2:3 with xerrorbars pt 7 ps 0.6 title 'step_stage'
unset output
set terminal png size 900,900 noenhanced
set output 'validation/results/h0508/validate.png'
plot f(x) title 'predicted = measured' lt -1, f(x)*1.15 title '+-15%' dt 2 lc rgb 'gray', f(x)/1.15 notitle dt 2 lc rgb 'gray', 'validation/results/h0508/validate.dat' index 0 using 1:4:2:3 with xerrorbars pt 7 ps 0.6 title 'concurrency:procs', 'validation/results/h0508/validate.dat' index 1 using 1:4:2:3 with xerrorbars pt 7 ps 0.6 title 'concurrency:streams', 'validation/results/h0508/validate.dat' index 2 using 1:4:2:3 with xerrorbars pt 7 ps 0.6 title 'context', 'validation/results/h0508/validate.dat' index 3 using 1:4:2:3 with xerrorbars pt 7 ps 0.6 title 'step', 'validation/results/h0508/validate.dat' index 4 using 1:4:2:3 with xerrorbars pt 7 ps 0.6 title 'step_stage'
unset output
