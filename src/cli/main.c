/* main.c — the octet command line: dispatches to subcommands (one file per
 * command in src/cli/). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command k_commands[] = {
    {"generate", cli_generate, "run a model on a prompt"},
    {"eval", cli_eval, "perplexity, and KLD / top-1 agreement vs BF16"},
    {"inspect", cli_inspect, "what a checkpoint is; --plan: what loading will do"},
    {"quantize", cli_quantize, "write an FP8 checkpoint"},
    {"convert", cli_convert, "re-express an FP8 checkpoint in another format (no re-quantizing)"},
    {"tokenize", cli_tokenize, "text -> token ids exactly as HF tokenizers"},
    {"bench", cli_bench, "benchmarks: gemm, fp8"},
    {"serve", cli_serve, "OpenAI-compatible HTTP server"},
    {"formats", cli_formats, "table of the FP8 formats and a quantization round trip"},
    {"cpu", cli_cpu, "detected CPU features and the active kernel level"},
};

static void usage(FILE *out)
{
    fprintf(out,
            "octet %s — FP8 inference for large language models\n\n"
            "usage: octet <command> [options]   (octet <command> --help for its options)\n\n"
            "commands:\n",
            OCTET_VERSION);
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(out, "  %-10s %s\n", k_commands[i].name, k_commands[i].help);
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
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (strcmp(cmd, k_commands[i].name) == 0)
            return k_commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "octet: unknown command '%s' (see: octet help)\n", cmd);
    return 2;
}
