/* cli_device_stubs.c — the two CLI commands the GPU machine's `octet` build
 * leaves out (bench/cuda/build_cli.sh): `serve` needs libmicrohttpd and
 * `bench` OpenBLAS, which that image lacks.  Everything else is the real CLI. */
#include <stdio.h>

#include "cli/cli.h"

static int left_out(const char *cmd, const char *lib)
{
    fprintf(stderr,
            "octet %s: not in this build (bench/cuda/build_cli.sh leaves it out: needs %s)\n", cmd,
            lib);
    return 2;
}

int cli_serve(int argc, char **argv)
{
    (void)argc, (void)argv;
    return left_out("serve", "libmicrohttpd");
}

int cli_bench(int argc, char **argv)
{
    (void)argc, (void)argv;
    return left_out("bench", "OpenBLAS");
}
