/* cli.h — subcommand entry points and shared CLI helpers. */
#ifndef OCTET_CLI_H
#define OCTET_CLI_H

#include "octet.h"

/* Installs a log sink that writes "octet: LEVEL: msg" to stderr; the level
 * comes from OCTET_LOG (debug|info|warn|error), default info. */
void cli_install_logger(void);

int cli_formats(int argc, char **argv);
int cli_cpu(int argc, char **argv);

#endif
