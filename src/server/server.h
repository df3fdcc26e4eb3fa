/* server.h — the server's request deadlines, beside oct_server_opts.
 *
 * `octet serve` sets them from --request-header-timeout,
 * --request-body-timeout and --request-body-min-rate (docs/SERVER.md);
 * oct_server_create uses the defaults. */
#ifndef OCTET_SERVER_SERVER_H
#define OCTET_SERVER_SERVER_H

#include "octet.h"

typedef struct srv_deadlines {
    double header_timeout_s; /* request line + headers, from the accept (default 10) */
    double body_timeout_s;   /* the whole body, from the end of the headers (default 60) */
    double body_min_rate;    /* bytes/s a body averages after its first second (default
                                1024; 0: no minimum) */
} srv_deadlines;

void srv_deadlines_default(srv_deadlines *d);

/* oct_server_create with these deadlines (NULL: the defaults). */
oct_status srv_server_create(const oct_model *m, const oct_tokenizer *tok, const char *model_dir,
                             const oct_server_opts *opts, const srv_deadlines *dl, oct_server **out,
                             oct_error *err);

#endif
