/* bench.c — `octet bench <name> [options]`: the command, dispatching to
 * bench/bench_<name>.c (their entry points in bench.h). */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli/cli.h"

int cli_bench(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: octet bench gemm [--m 1,256] [--shapes KxN,...] [--threads N] [--json]\n"
                "       octet bench fp8  [--n N] [--json]\n"
                "       octet bench model [--shape small|3b|8b] [--prompt N] [--decode N] "
                "[--json]\n"
                "       octet bench batch --model DIR [--quantization Q] [--batch B] [--prompt P] "
                "[--decode N] [--json]\n"
                "       octet bench serve_load [options]   (see docs/SERVER.md)\n"
                "       octet bench open [--tensors N --shards S] [--repeat R] [--json]\n");
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "gemm") == 0)
        return bench_gemm_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "fp8") == 0)
        return bench_fp8_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "model") == 0)
        return bench_model_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "batch") == 0)
        return bench_batch_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "serve_load") == 0)
        return bench_serve_load_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "open") == 0)
        return bench_open_main(argc - 1, argv + 1);
    fprintf(stderr,
            "octet bench: unknown benchmark '%s' (gemm, fp8, model, batch, serve_load, open)\n",
            argv[1]);
    return 2;
}
