/* log.c — the process-wide log sink.  The library never prints; front ends
 * install a sink (the CLI writes to stderr). */
#include <stdio.h>

#include "core/core.h"

static oct_log_fn g_log_fn;
static void *g_log_user;
static oct_log_level g_log_min = OCT_LOG_INFO;

void oct_log_set(oct_log_fn fn, void *user, oct_log_level min_level)
{
    g_log_fn = fn;
    g_log_user = user;
    g_log_min = min_level;
}

const char *oct_log_level_str(oct_log_level level)
{
    switch (level) {
    case OCT_LOG_DEBUG: return "debug";
    case OCT_LOG_INFO: return "info";
    case OCT_LOG_WARN: return "warn";
    case OCT_LOG_ERROR: return "error";
    case OCT_LOG_OFF: break;
    }
    return "off";
}

bool oct_log_enabled(oct_log_level level)
{
    return g_log_fn != NULL && level >= g_log_min && level < OCT_LOG_OFF;
}

void oct_log(oct_log_level level, const char *fmt, ...)
{
    if (!oct_log_enabled(level))
        return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g_log_fn(level, buf, g_log_user);
}
