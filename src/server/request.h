/* request.h — OpenAI request bodies (JSON) -> a validated srv_request.
 *
 * Pure functions over untrusted bytes (fuzzed by tests/fuzz/fuzz_request.c):
 * never crash, never trust a size.  Every rejection names the field
 * (OpenAI's error `param`). */
#ifndef OCTET_SERVER_REQUEST_H
#define OCTET_SERVER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "octet.h"

typedef enum { SRV_COMPLETIONS = 0, SRV_CHAT = 1 } srv_kind;

#define SRV_MAX_STOP 8
#define SRV_MAX_LOGPROBS 20

typedef struct srv_error {
    int http;         /* 400, 401, 404, 413, ... */
    const char *type; /* "invalid_request_error", ... */
    char param[64];   /* the offending field ("" when none) */
    char message[512];
} srv_error;

typedef struct srv_limits {
    int max_depth;          /* JSON nesting */
    int max_n;              /* choices per request */
    int64_t max_tokens;     /* cap on max_tokens */
    int64_t max_prompt_ids; /* cap on a token-id prompt's length */
} srv_limits;

typedef struct srv_request {
    srv_kind kind;
    char *model;  /* NULL when absent */
    char *prompt; /* completions, text prompt (NUL-terminated, prompt_len bytes) */
    size_t prompt_len;
    int32_t *prompt_ids; /* completions, token-id prompt [n_prompt_ids] */
    int64_t n_prompt_ids;
    char *messages_json; /* chat: messages with content flattened to strings */
    int64_t max_tokens;  /* -1: not given */
    oct_sampling sampling;
    bool seed_set;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int n;
    int logprobs; /* -1: none; else top-k count (0 = only the chosen token) */
    bool echo, stream, include_usage, ignore_eos;
} srv_request;

void srv_error_set(srv_error *e, int http, const char *type, const char *param, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

/* Deepest nesting of arrays/objects in JSON text (strings skipped). */
int srv_json_depth(const char *s, size_t len);

/* Parses and validates a body.  On failure fills err (400 unless said) and
 * returns false; *out is then empty.  srv_request_free releases *out. */
bool srv_request_parse(const char *body, size_t len, srv_kind kind, const srv_limits *lim,
                       srv_request *out, srv_error *err);
void srv_request_free(srv_request *r);

#endif
