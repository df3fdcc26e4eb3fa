/* octet/server.h — the OpenAI-compatible HTTP server (part of octet.h, the public API:
 * docs/API.md). */
#ifndef OCTET_API_SERVER_H
#define OCTET_API_SERVER_H

#include "octet/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `octet serve`: an OpenAI-compatible HTTP server (GNU libmicrohttpd) with
 * continuous batching over one engine thread.  See docs/SERVER.md.
 *
 * Thread safety: the server runs its own threads; create / shutdown / free
 * are called from one thread.  The model and tokenizer must outlive it. */

typedef struct oct_server oct_server;

typedef struct oct_server_opts {
    const char *host;                /* IPv4/IPv6 literal to bind; default "127.0.0.1" */
    int port;                        /* 0: any free port (see oct_server_port) */
    const char *api_key;             /* NULL: no auth; else "Authorization: Bearer KEY" on /v1 */
    const char *served_model_name;   /* "model" in responses; default: the model folder name */
    int max_num_seqs;                /* sequences in the running batch (default 32) */
    int64_t max_model_len;           /* prompt + output tokens (default: the model's limit) */
    int64_t max_num_batched_tokens;  /* tokens per forward pass (default 512) */
    int64_t kv_cache_tokens;         /* KV pool size in tokens; 0: max_num_seqs full sequences,
                                        or on a GPU what gpu_memory_utilization leaves */
    double gpu_memory_utilization;   /* share of the GPU's memory for the model, workspaces
                                        and KV pool (vLLM's; default 0.9; the CPU: unused) */
    int64_t max_waiting;             /* queued sequences before 503 (default 1024) */
    int max_connections;             /* concurrent HTTP connections (default 256) */
    int idle_timeout_s;              /* close a connection idle this long (default 60) */
    double request_header_timeout_s; /* request line + headers, from the accept (default 10) */
    double request_body_timeout_s;   /* the whole body, from the end of the headers (60) */
    double request_body_min_rate;    /* bytes/s a body averages after its first second
                                        (default 1024; 0: no minimum) */
    size_t max_body_bytes;           /* request body limit, 413 beyond (default 4 MiB) */
    size_t max_header_bytes;         /* request line + headers (default 16 KiB) */
    int max_json_depth;              /* JSON nesting limit (default 32) */
    int max_n;                       /* choices per request (default 16) */
    /* Host / Origin names accepted besides the loopback ones, comma-separated,
     * "*" = any (`serve --allowed-hosts`); NULL: $OCTET_ALLOWED_HOSTS, else
     * loopback names only when bound to loopback, no check otherwise. */
    const char *allowed_hosts;
    /* Full 16-token blocks of earlier requests' KV cache are reused by later
     * requests that start with the same tokens (default true; vLLM's
     * --enable-prefix-caching). */
    bool enable_prefix_caching;
} oct_server_opts;

OCT_API void oct_server_opts_default(oct_server_opts *o);

/* Starts listening and serving.  `model_dir` names the default model name. */
OCT_API oct_status oct_server_create(const oct_model *m, const oct_tokenizer *tok,
                                     const char *model_dir, const oct_server_opts *opts,
                                     oct_server **out, oct_error *err);
/* The bound TCP port. */
OCT_API int oct_server_port(const oct_server *s);
/* Graceful stop: refuses new requests (503), lets in-flight ones run up to
 * grace_s seconds, cancels the rest and closes every connection.  Blocks. */
OCT_API void oct_server_shutdown(oct_server *s, double grace_s);
/* Shuts down (with no grace) if still running, then frees.  NULL: no-op. */
OCT_API void oct_server_free(oct_server *s);

#ifdef __cplusplus
}
#endif
#endif
