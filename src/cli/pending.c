/* pending.c — weak fallbacks for commands whose implementation has not landed
 * yet; a command's own file overrides its fallback with a strong definition. */
#include <stdio.h>

#include "cli/cli.h"

static int pending(const char *name)
{
    fprintf(stderr, "octet %s: not available in this build yet\n", name);
    return 2;
}

#define PENDING(name)                                                                              \
    __attribute__((weak)) int cli_##name(int argc, char **argv)                                    \
    {                                                                                              \
        (void)argc;                                                                                \
        (void)argv;                                                                                \
        return pending(#name);                                                                     \
    }

PENDING(generate)
PENDING(eval)
PENDING(inspect)
PENDING(quantize)
PENDING(tokenize)
PENDING(serve)

__attribute__((weak)) int bench_gemm_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return pending("bench gemm");
}

__attribute__((weak)) int bench_fp8_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return pending("bench fp8");
}
