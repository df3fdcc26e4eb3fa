/* cli.h — subcommand entry points and shared CLI helpers.
 *
 * Each command lives in its own file src/cli/<command>.c and defines
 * `int cli_<command>(int argc, char **argv)` (argv[0] is the command name);
 * `octet bench <name>` runs bench/bench_<name>.c's bench_<name>_main. */
#ifndef OCTET_CLI_H
#define OCTET_CLI_H

#include <stdbool.h>

#include "octet.h"

/* Installs a log sink that writes "octet: LEVEL: msg" to stderr; the level
 * comes from OCTET_LOG (debug|info|warn|error), default info. */
void cli_install_logger(void);

int cli_generate(int argc, char **argv);
int cli_eval(int argc, char **argv);
int cli_inspect(int argc, char **argv);
int cli_quantize(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_formats(int argc, char **argv);

struct model_args;
/* `octet inspect --plan` (inspect_plan.c). */
int cli_inspect_plan(struct model_args *ma, bool as_json);
int cli_cpu(int argc, char **argv);

/* `octet bench <name>`: each benchmark lives in bench/bench_<name>.c. */
int bench_gemm_main(int argc, char **argv);
int bench_fp8_main(int argc, char **argv);
int bench_model_main(int argc, char **argv);
int bench_serve_load_main(int argc, char **argv);
int bench_open_main(int argc, char **argv);

#endif
