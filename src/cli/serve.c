/* serve.c — `octet serve`: load the model and tokenizer, start the
 * OpenAI-compatible server, wait for SIGINT/SIGTERM, shut down gracefully. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/model_args.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: octet serve --model DIR [options]\n"
            "%s"
            "  --host ADDR                 address to bind (default 127.0.0.1)\n"
            "  --port N                    TCP port (default 8000; 0 = any free port)\n"
            "  --served-model-name NAME    model name in the API (default: DIR)\n"
            "  --api-key KEY               require \"Authorization: Bearer KEY\" on /v1\n"
            "                              (default: $OCTET_API_KEY if set)\n"
            "  --allowed-hosts H[,H...]    Host/Origin names accepted besides localhost,\n"
            "                              127.0.0.1 and [::1]; * = any (default: only\n"
            "                              those when bound to loopback, else any;\n"
            "                              $OCTET_ALLOWED_HOSTS)\n"
            "  --max-num-seqs N            sequences in the running batch (default 32)\n"
            "  --max-model-len N           prompt + output tokens (default: the model's)\n"
            "  --max-num-batched-tokens N  tokens per forward pass (default 512)\n"
            "  --kv-cache-tokens N         KV-cache size in tokens (default: enough for\n"
            "                              max-num-seqs full-length sequences; on a GPU\n"
            "                              at most what --gpu-memory-utilization leaves)\n"
            "  --gpu-memory-utilization F  share of the GPU's memory for the model,\n"
            "                              workspaces and KV cache (default 0.9)\n"
            "  --max-waiting N             queued sequences before 503 (default 1024)\n"
            "  --[no-]enable-prefix-caching  reuse the KV blocks of prompts seen before\n"
            "                              (default on)\n"
            "  --max-connections N         concurrent connections (default 256)\n"
            "  --idle-timeout S            close a connection where nothing moves for S s\n"
            "                              (default 60)\n"
            "  --request-header-timeout S  request line + headers within S s of the\n"
            "                              connection (default 10)\n"
            "  --request-body-timeout S    the body within S s of the headers (default 60)\n"
            "  --request-body-min-rate B   bytes/s a body averages after its first second\n"
            "                              (default 1024; 0 = no minimum)\n"
            "  --max-body-bytes N          request body limit (default 4194304)\n"
            "  --max-header-bytes N        request header limit (default 16384)\n"
            "  --max-json-depth N          JSON nesting limit (default 32)\n"
            "  --max-n N                   choices per request (default 16)\n"
            "  --shutdown-grace S          seconds in-flight requests get on SIGINT/SIGTERM\n"
            "                              (default 5)\n",
            model_args_usage());
}

/* SIGINT / SIGTERM write their number here; the main thread reads it.  A
 * handler, not sigwait alone: threads that libraries start before main
 * (OpenBLAS's pool) do not block the signals, and one of them taking a
 * signal that has no handler would end the process unannounced. */
static int g_signal_fd = -1;

static void on_signal(int sig)
{
    unsigned char b = (unsigned char)sig;
    ssize_t r = write(g_signal_fd, &b, 1);
    (void)r;
}

/* Installs the handler; returns the read end of its pipe, or -1. */
static int catch_signals(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    g_signal_fd = p[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return p[0];
}

/* Positive integer flag value, or -1 (message printed). */
static long long num(const char *flag, const char *v, long long lo)
{
    char *end;
    long long x = strtoll(v, &end, 10);
    if (*v == 0 || *end != 0 || x < lo) {
        fprintf(stderr, "octet serve: %s needs an integer >= %lld (got '%s')\n", flag, lo, v);
        return -1;
    }
    return x;
}

/* A number > 0 (>= 0 with zero_ok): seconds or bytes/s; -1 when bad. */
static double seconds(const char *flag, const char *v, bool zero_ok)
{
    char *end;
    double x = strtod(v, &end);
    if (*v == 0 || *end != 0 || !(x >= 0) || (!zero_ok && x == 0) || x > 1e9) {
        fprintf(stderr, "octet serve: %s needs a number %s 0 (got '%s')\n", flag,
                zero_ok ? ">=" : ">", v);
        return -1;
    }
    return x;
}

/* The numeric server flags, with their smallest values. */
static const struct {
    const char *flag;
    long long lo;
} k_nums[] = {{"--port", 0},
              {"--max-num-seqs", 1},
              {"--max-model-len", 2},
              {"--max-num-batched-tokens", 1},
              {"--kv-cache-tokens", 1},
              {"--max-waiting", 1},
              {"--max-connections", 1},
              {"--idle-timeout", 0},
              {"--max-body-bytes", 1},
              {"--max-header-bytes", 1024},
              {"--max-json-depth", 1},
              {"--max-n", 1}};

/* Numeric flag k_nums[k] = x into its field, clamped to the field's range. */
static void set_num(oct_server_opts *so, size_t k, long long x)
{
    switch (k) {
    case 0: so->port = (int)(x > 65535 ? 65535 : x); break;
    case 1: so->max_num_seqs = (int)(x > 4096 ? 4096 : x); break;
    case 2: so->max_model_len = x; break;
    case 3: so->max_num_batched_tokens = x; break;
    case 4: so->kv_cache_tokens = x; break;
    case 5: so->max_waiting = x; break;
    case 6: so->max_connections = (int)(x > 65536 ? 65536 : x); break;
    case 7: so->idle_timeout_s = (int)(x > 86400 ? 86400 : x); break;
    case 8: so->max_body_bytes = (size_t)x; break;
    case 9: so->max_header_bytes = (size_t)x; break;
    case 10: so->max_json_depth = (int)(x > 1000 ? 1000 : x); break;
    default: so->max_n = (int)(x > 128 ? 128 : x); break;
    }
}

/* One server flag f with its value v; 0, or 2 (usage error, printed). */
static int serve_flag(oct_server_opts *so, double *grace, const char *f, const char *v)
{
    if (strcmp(f, "--host") == 0) {
        so->host = v;
    } else if (strcmp(f, "--served-model-name") == 0) {
        so->served_model_name = v;
    } else if (strcmp(f, "--api-key") == 0) {
        if (!*v) { /* an empty key would turn authentication off without saying so */
            fprintf(stderr, "octet serve: --api-key must not be empty\n");
            return 2;
        }
        so->api_key = v;
    } else if (strcmp(f, "--allowed-hosts") == 0) {
        if (!*v) {
            fprintf(stderr, "octet serve: --allowed-hosts must not be empty (* = any)\n");
            return 2;
        }
        so->allowed_hosts = v;
    } else if (strcmp(f, "--gpu-memory-utilization") == 0) {
        char *end = NULL;
        so->gpu_memory_utilization = strtod(v, &end);
        if (!end || *end || !(so->gpu_memory_utilization > 0.0) ||
            so->gpu_memory_utilization > 1.0) {
            fprintf(stderr, "octet serve: --gpu-memory-utilization must be in (0, 1], not '%s'\n",
                    v);
            return 2;
        }
    } else if (strcmp(f, "--shutdown-grace") == 0) {
        *grace = strtod(v, NULL);
    } else if (strcmp(f, "--request-header-timeout") == 0) {
        if ((so->request_header_timeout_s = seconds(f, v, false)) < 0)
            return 2;
    } else if (strcmp(f, "--request-body-timeout") == 0) {
        if ((so->request_body_timeout_s = seconds(f, v, false)) < 0)
            return 2;
    } else if (strcmp(f, "--request-body-min-rate") == 0) {
        if ((so->request_body_min_rate = seconds(f, v, true)) < 0)
            return 2;
    } else {
        size_t k = 0;
        while (k < sizeof k_nums / sizeof k_nums[0] && strcmp(f, k_nums[k].flag) != 0)
            k++;
        if (k == sizeof k_nums / sizeof k_nums[0]) {
            fprintf(stderr, "octet serve: unknown option '%s'\n", f);
            usage(stderr);
            return 2;
        }
        long long x = num(f, v, k_nums[k].lo);
        if (x < 0)
            return 2;
        set_num(so, k, x);
    }
    return 0;
}

/* The command line into ma, so and *grace; -1: go on, else the exit code. */
static int serve_args(int argc, char **argv, model_args *ma, oct_server_opts *so, double *grace)
{
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(ma, argc, argv, &i, "serve");
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        const char *f = argv[i];
        if (strcmp(f, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(f, "--enable-prefix-caching") == 0 ||
            strcmp(f, "--no-enable-prefix-caching") == 0) {
            so->enable_prefix_caching = f[2] == 'e';
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "octet serve: unknown or incomplete option '%s'\n", f);
            usage(stderr);
            return 2;
        }
        if ((r = serve_flag(so, grace, f, argv[++i])) != 0)
            return r;
    }
    return -1;
}

int cli_serve(int argc, char **argv)
{
    model_args ma;
    model_args_init(&ma);
    ma.progress = false;
    oct_server_opts so;
    oct_server_opts_default(&so);
    so.api_key = getenv("OCTET_API_KEY");
    double grace = 5.0;
    int code = serve_args(argc, argv, &ma, &so, &grace);
    if (code >= 0)
        return code;
    /* The server's threads start with the signals blocked; the main
     * thread unblocks them once it waits. */
    int sig_rd = catch_signals();
    if (sig_rd < 0) {
        fprintf(stderr, "octet serve: pipe: %s\n", strerror(errno));
        return 1;
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    oct_model *m = NULL;
    int rc = model_args_load(&ma, "serve", &m);
    if (rc)
        return rc;
    oct_error err;
    oct_error_clear(&err);
    oct_tokenizer *tok = NULL;
    oct_server *srv = NULL;
    rc = 1;
    if (oct_tokenizer_load(ma.model, &tok, &err) != OCT_OK) {
        fprintf(stderr, "octet serve: %s\n", err.message);
        goto out;
    }
    if (oct_server_create(m, tok, ma.model, &so, &srv, &err) != OCT_OK) {
        fprintf(stderr, "octet serve: %s\n", err.message);
        goto out;
    }
    const char *host = so.host ? so.host : "127.0.0.1";
    bool v6 = strchr(host, ':') != NULL;
    printf("octet serve: listening on http://%s%s%s:%d (model %s)\n", v6 ? "[" : "", host,
           v6 ? "]" : "", oct_server_port(srv),
           so.served_model_name ? so.served_model_name : ma.model);
    fflush(stdout);
    pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
    unsigned char b = 0;
    while (read(sig_rd, &b, 1) < 0 && errno == EINTR)
        ;
    int sig = b;
    fprintf(stderr, "octet serve: %s: shutting down (grace %.1f s)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", grace);
    oct_server_shutdown(srv, grace);
    rc = 0;
out:
    oct_server_free(srv);
    oct_tokenizer_free(tok);
    oct_model_free(m);
    return rc;
}
