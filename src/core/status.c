/* status.c — status names and error filling. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"

const char *oct_status_str(oct_status st)
{
    switch (st) {
    case OCT_OK: return "ok";
    case OCT_ERR_INVALID_ARG: return "invalid argument";
    case OCT_ERR_NOMEM: return "out of memory";
    case OCT_ERR_IO: return "I/O error";
    case OCT_ERR_FORMAT: return "malformed input";
    case OCT_ERR_UNSUPPORTED: return "unsupported";
    case OCT_ERR_OVERFLOW: return "size overflow";
    case OCT_ERR_NOT_FOUND: return "not found";
    case OCT_ERR_LIMIT: return "limit exceeded";
    case OCT_ERR_CANCELLED: return "cancelled";
    case OCT_ERR_INTERNAL: return "internal error";
    case OCT_STATUS_COUNT: break;
    }
    return "unknown status";
}

void oct_error_clear(oct_error *err)
{
    if (!err)
        return;
    err->status = OCT_OK;
    err->offset = -1;
    err->message[0] = 0;
}

oct_status oct_error_set(oct_error *err, oct_status st, int64_t offset, const char *fmt, ...)
{
    if (!err)
        return st;
    err->status = st;
    err->offset = offset;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return st;
}

void oct_error_prefix(oct_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    int np = vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (np < 0)
        return;
    size_t plen = strlen(prefix) + 2; /* "prefix: " */
    size_t cap = sizeof err->message;
    if (plen >= cap)
        return;
    size_t mlen = strnlen(err->message, cap - 1);
    if (mlen > cap - 1 - plen)
        mlen = cap - 1 - plen;
    memmove(err->message + plen, err->message, mlen);
    err->message[plen + mlen] = 0;
    memcpy(err->message, prefix, plen - 2);
    err->message[plen - 2] = ':';
    err->message[plen - 1] = ' ';
}
