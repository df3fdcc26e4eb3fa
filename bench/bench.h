/* bench.h — the benchmarks behind `octet bench <name>` (bench.c): each lives
 * in bench/bench_<name>.c (serve_load: serve_load.c) and is run as
 * `bench_<name>_main(argc, argv)`, argv[0] being the benchmark's name. */
#ifndef OCTET_BENCH_H
#define OCTET_BENCH_H

int bench_gemm_main(int argc, char **argv);
int bench_fp8_main(int argc, char **argv);
int bench_model_main(int argc, char **argv);
int bench_batch_main(int argc, char **argv);
int bench_serve_load_main(int argc, char **argv);
int bench_open_main(int argc, char **argv);

#endif
