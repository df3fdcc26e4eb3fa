/* log.c — the CLI's log sink (stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void stderr_sink(oct_log_level level, const char *msg, void *user)
{
    (void)user;
    fprintf(stderr, "octet: %s: %s\n", oct_log_level_str(level), msg);
}

void cli_install_logger(void)
{
    oct_log_level min = OCT_LOG_INFO;
    const char *env = getenv("OCTET_LOG");
    if (env) {
        static const oct_log_level all[] = {OCT_LOG_DEBUG, OCT_LOG_INFO, OCT_LOG_WARN,
                                            OCT_LOG_ERROR};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (strcmp(env, oct_log_level_str(all[i])) == 0)
                min = all[i];
    }
    oct_log_set(stderr_sink, NULL, min);
}
