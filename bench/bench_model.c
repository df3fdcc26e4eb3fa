/* bench_model.c — `octet bench model`: prefill and decode tokens/s of a whole
 * model with random weights, BF16 vs the online FP8 schemes, in one process,
 * with a memory-bandwidth probe measured in the same run so decode shows as
 * a fraction of the machine's read bandwidth (decode reads every weight once
 * per token).
 *
 *   octet bench model [--shape small|3b|8b|HxIxLxV] [--dir DIR] [--prompt N]
 *                     [--decode N] [--schemes bf16,fp8_per_block,...] [--json]
 *
 * The checkpoint is written to DIR (default /tmp/octet_bench_<shape>) on the
 * first run and reused afterwards. */
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "random_model.h"
#include "bench.h"
#include "octet.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Read bandwidth: sum 1 GiB of 64-bit words with all threads (integer adds
 * vectorize; a float sum would not without -ffast-math), best of 3. */
static double bandwidth_gbs(void)
{
    size_t n = (size_t)1 << 27;
    uint64_t *a = malloc(n * sizeof(uint64_t));
    if (!a)
        return 0;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        a[i] = i;
    double best = 0;
    volatile uint64_t sink = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now_s();
        uint64_t total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
        for (size_t i = 0; i < n; i++)
            total += a[i];
        double dt = now_s() - t0;
        sink += total;
        double gbs = (double)(n * sizeof(uint64_t)) / dt / 1e9;
        best = gbs > best ? gbs : best;
    }
    (void)sink;
    free(a);
    return best;
}

typedef struct row {
    double load_s, prefill_tok_s, decode_tok_s, weight_gb, decode_gbs;
} row;

static int run_scheme(const char *dir, const char *scheme, int64_t prompt, int64_t decode, row *r)
{
    oct_model_opts o;
    memset(&o, 0, sizeof o);
    if (strcmp(scheme, "bf16") != 0)
        o.quantization = scheme;
    oct_model *m = NULL;
    oct_session *s = NULL;
    oct_error err;
    double t0 = now_s();
    if (oct_model_load(dir, &o, &m, &err) != OCT_OK) {
        fprintf(stderr, "octet bench model: %s: %s\n", scheme, err.message);
        return 1;
    }
    r->load_s = now_s() - t0;
    int64_t V = oct_model_vocab_size(m);
    if (oct_session_create(m, 1, prompt + decode + 1, &s, &err) != OCT_OK) {
        fprintf(stderr, "octet bench model: %s\n", err.message);
        oct_model_free(m);
        return 1;
    }
    int32_t *tok = malloc((size_t)prompt * sizeof(int32_t));
    int32_t *seq = calloc((size_t)prompt, sizeof(int32_t));
    int64_t *pos = malloc((size_t)prompt * sizeof(int64_t));
    bool *want = calloc((size_t)prompt, sizeof(bool));
    float *logits = malloc((size_t)V * sizeof(float));
    int rc = 1;
    if (!tok || !seq || !pos || !want || !logits)
        goto out;
    for (int64_t i = 0; i < prompt; i++) {
        tok[i] = (int32_t)((i * 7919 + 11) % V);
        pos[i] = i;
    }
    want[prompt - 1] = true;
    t0 = now_s();
    if (oct_session_forward(s, prompt, tok, seq, pos, want, logits, &err) != OCT_OK)
        goto fail;
    r->prefill_tok_s = (double)prompt / (now_s() - t0);
    t0 = now_s();
    for (int64_t i = 0; i < decode; i++) {
        int32_t t = (int32_t)((i * 31 + 7) % V), q = 0;
        int64_t p = prompt + i;
        if (oct_session_forward(s, 1, &t, &q, &p, NULL, logits, &err) != OCT_OK)
            goto fail;
    }
    r->decode_tok_s = (double)decode / (now_s() - t0);
    /* bytes a decode step must read: every linear weight + lm_head (the
     * embedding row read is negligible) */
    r->weight_gb = (double)oct_plan_model_bytes(oct_model_get_plan(m)) / 1e9;
    r->decode_gbs = r->weight_gb * r->decode_tok_s;
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "octet bench model: %s: %s\n", scheme, err.message);
out:
    free(tok), free(seq), free(pos), free(want), free(logits);
    oct_session_free(s);
    oct_model_free(m);
    return rc;
}

int bench_model_main(int argc, char **argv)
{
    const char *shape_name = "small", *dir = NULL,
               *schemes = "bf16,fp8_per_tensor,fp8_per_block,mxfp8";
    int64_t prompt = 256, decode = 32;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        bool has = i + 1 < argc;
        if (has && strcmp(argv[i], "--shape") == 0)
            shape_name = argv[++i];
        else if (has && strcmp(argv[i], "--dir") == 0)
            dir = argv[++i];
        else if (has && strcmp(argv[i], "--prompt") == 0)
            prompt = atoll(argv[++i]);
        else if (has && strcmp(argv[i], "--decode") == 0)
            decode = atoll(argv[++i]);
        else if (has && strcmp(argv[i], "--schemes") == 0)
            schemes = argv[++i];
        else if (has && strcmp(argv[i], "--threads") == 0)
            oct_threads_set(atoi(argv[++i]));
        else if (strcmp(argv[i], "--json") == 0)
            json = true;
        else {
            fprintf(stderr, "usage: octet bench model [--shape small|3b|8b|HxIxLxV] [--dir DIR] "
                            "[--prompt N] [--decode N] [--schemes a,b] [--threads N] [--json]\n");
            return 2;
        }
    }
    shape s;
    if (strcmp(shape_name, "small") == 0)
        s = (shape){1024, 2816, 8, 32000, 8, 4};
    else if (strcmp(shape_name, "3b") == 0) /* Llama-3.2-3B */
        s = (shape){3072, 8192, 28, 128256, 24, 8};
    else if (strcmp(shape_name, "8b") == 0) /* Llama-3-8B */
        s = (shape){4096, 14336, 32, 128256, 32, 8};
    else if (sscanf(shape_name, "%lldx%lldx%lldx%lld", (long long *)&s.hidden,
                    (long long *)&s.inter, (long long *)&s.layers, (long long *)&s.vocab) == 4) {
        s.heads = s.hidden / 128;
        s.kv_heads = s.heads > 8 ? 8 : s.heads;
    } else {
        fprintf(stderr, "octet bench model: unknown --shape %s\n", shape_name);
        return 2;
    }
    if (prompt < 1 || decode < 1 || s.heads < 1) {
        fprintf(stderr, "octet bench model: bad sizes\n");
        return 2;
    }
    oct_threads_set(oct_threads_get());
    char path[512], cfg[600];
    if (!dir) {
        snprintf(path, sizeof path, "/tmp/octet_bench_%s", shape_name);
        dir = path;
    }
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    struct stat sb;
    if (stat(cfg, &sb) != 0) {
        mkdir(dir, 0755);
        fprintf(stderr, "octet bench model: writing a random %s checkpoint to %s ...\n", shape_name,
                dir);
        if (random_model_write(dir, s) != 0)
            return 1;
    }
    row rows[8];
    int nr = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", schemes);
    for (char *tk = strtok(list, ","); tk && nr < 8; tk = strtok(NULL, ",")) {
        if (run_scheme(dir, tk, prompt, decode, &rows[nr]) != 0)
            return 1;
        nr++;
    }
    double bw = bandwidth_gbs(); /* after the loads: keeps their peak-RSS log honest */
    /* names for printing (strtok wrote into list) */
    const char *names[8];
    snprintf(list, sizeof list, "%s", schemes);
    int k = 0;
    for (char *tk = strtok(list, ","); tk && k < nr; tk = strtok(NULL, ","))
        names[k++] = tk;
    double base_dec = 0, base_pre = 0;
    for (int i = 0; i < nr; i++)
        if (strcmp(names[i], "bf16") == 0) {
            base_dec = rows[i].decode_tok_s;
            base_pre = rows[i].prefill_tok_s;
        }
    if (json) {
        json_t *o = json_object(), *a = json_array();
        json_object_set_new(o, "shape", json_string(shape_name));
        json_object_set_new(o, "bandwidth_gbs", json_real(bw));
        json_object_set_new(o, "threads", json_integer(oct_threads_get()));
        for (int i = 0; i < nr; i++)
            json_array_append_new(a, json_pack("{s:s, s:f, s:f, s:f, s:f, s:f}", "scheme", names[i],
                                               "load_s", rows[i].load_s, "prefill_tok_s",
                                               rows[i].prefill_tok_s, "decode_tok_s",
                                               rows[i].decode_tok_s, "weight_gb", rows[i].weight_gb,
                                               "decode_gbs", rows[i].decode_gbs));
        json_object_set_new(o, "rows", a);
        char *txt = json_dumps(o, JSON_INDENT(1));
        printf("%s\n", txt);
        free(txt);
        json_decref(o);
        return 0;
    }
    printf("model %s (hidden %lld, intermediate %lld, %lld layers, vocab %lld), prompt %lld, "
           "decode %lld, %d threads; read bandwidth probe %.1f GB/s\n",
           shape_name, (long long)s.hidden, (long long)s.inter, (long long)s.layers,
           (long long)s.vocab, (long long)prompt, (long long)decode, oct_threads_get(), bw);
    printf("%-16s %8s %10s %9s %10s %9s %8s %9s %10s\n", "scheme", "load s", "weights GB",
           "prefill", "x BF16", "decode", "x BF16", "GB/s", "% of bw");
    for (int i = 0; i < nr; i++)
        printf("%-16s %8.2f %10.2f %9.1f %10.2f %9.2f %8.2f %9.1f %9.0f%%\n", names[i],
               rows[i].load_s, rows[i].weight_gb, rows[i].prefill_tok_s,
               base_pre > 0 ? rows[i].prefill_tok_s / base_pre : 0, rows[i].decode_tok_s,
               base_dec > 0 ? rows[i].decode_tok_s / base_dec : 0, rows[i].decode_gbs,
               bw > 0 ? 100 * rows[i].decode_gbs / bw : 0);
    return 0;
}
