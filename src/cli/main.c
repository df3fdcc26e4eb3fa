/* main.c — the octet command line: dispatches to subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "octet %s — FP8 inference for large language models\n"
            "\n"
            "usage: octet <command> [options]\n"
            "\n"
            "commands:\n"
            "  formats     table of the five FP8 formats and a quantize round trip\n"
            "  cpu         show detected CPU features and the active kernel level\n"
            "  help        this text\n",
            OCTET_VERSION);
}

int main(int argc, char **argv)
{
    cli_install_logger();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("octet %s\n", OCTET_VERSION);
        return 0;
    }
    if (strcmp(cmd, "formats") == 0)
        return cli_formats(argc - 1, argv + 1);
    if (strcmp(cmd, "cpu") == 0)
        return cli_cpu(argc - 1, argv + 1);
    fprintf(stderr, "octet: unknown command '%s' (see: octet help)\n", cmd);
    return 2;
}
