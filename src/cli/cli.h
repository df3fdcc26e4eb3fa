/* cli.h — subcommand entry points and shared CLI helpers.
 *
 * Each command lives in its own file src/cli/<command>.c and defines
 * `int cli_<command>(int argc, char **argv)` (argv[0] is the command name);
 * `octet bench` is bench/bench.c's. */
#ifndef OCTET_CLI_H
#define OCTET_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "octet.h"

/* Installs a log sink that writes "octet: LEVEL: msg" to stderr; the level
 * comes from OCTET_LOG (debug|info|warn|error), default info. */
void cli_install_logger(void);

/* --max-shard-size GB of `octet <cmd>` into *bytes; false (message printed):
 * not a size in (0, 1e6] GB. */
bool cli_shard_size(const char *cmd, const char *v, size_t *bytes);

int cli_generate(int argc, char **argv);
int cli_eval(int argc, char **argv);
int cli_inspect(int argc, char **argv);
int cli_quantize(int argc, char **argv);
int cli_convert(int argc, char **argv);
/* `octet inspect --plan --convert-to FORMAT` (convert.c). */
int cli_convert_plan(const char *model, const char *format);
int cli_tokenize(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_formats(int argc, char **argv);

struct model_args;
/* `octet inspect --plan` (inspect_plan.c). */
int cli_inspect_plan(struct model_args *ma, bool as_json, int tp);
int cli_cpu(int argc, char **argv);

#endif
