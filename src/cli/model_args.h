/* model_args.h — the flags every command that loads a model shares (parsed in
 * one place, named as vLLM names them). */
#ifndef OCTET_CLI_MODEL_ARGS_H
#define OCTET_CLI_MODEL_ARGS_H

#include <stdbool.h>

#include "octet.h"

typedef struct model_args {
    const char *model;
    oct_model_opts opts;
    int threads;
    bool progress;
} model_args;

void model_args_init(model_args *a);

/* If argv[*i] is a shared model flag, consumes it (and its value) and returns
 * 1; returns 0 if it is not one; -1 (after printing why) on a bad value. */
int model_args_parse(model_args *a, int argc, char **argv, int *i, const char *cmd);

/* Usage text of the shared flags. */
const char *model_args_usage(void);

/* Loads the model with a progress bar on a TTY; prints errors. */
int model_args_load(model_args *a, const char *cmd, oct_model **out);

#endif
