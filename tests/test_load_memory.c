/* test_load_memory.c — streaming online quantization keeps the peak resident
 * memory of loading at most the FP8 model + the largest layer in BF16 + 10%
 * (issue 6).  A ~1 GB BF16 Llama checkpoint is written on the fly (streamed,
 * random weights), then a fresh child process loads it with
 * --quantization fp8_per_block and reports its peak RSS (VmHWM).
 *
 * Under ASan the bound is not checked: ASan's shadow memory and its 256 MB
 * quarantine of freed blocks make RSS measure the sanitizer, not octet; the
 * ASan run still loads a smaller model of the same shape family end to end. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "octet.h"
#include "testlib.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

typedef struct shape {
    int64_t hidden, inter, layers, vocab;
} shape;

static uint64_t g_rng = 0x1234567;

static uint16_t rnd_bf16(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    /* small random values: sign, exponent 2^-9..2^-5, random mantissa */
    uint32_t r = (uint32_t)(g_rng >> 33);
    uint16_t e = (uint16_t)(118 + (r & 3));
    return (uint16_t)(((r >> 2) & 1) << 15 | e << 7 | ((r >> 3) & 0x7F));
}

static int write_tensor(oct_st_writer *w, const char *name, int64_t rows, int64_t cols,
                        uint16_t *buf, size_t buf_elems, oct_error *err)
{
    size_t total = (size_t)(rows * cols);
    for (size_t done = 0; done < total;) {
        size_t n = total - done < buf_elems ? total - done : buf_elems;
        for (size_t i = 0; i < n; i++)
            buf[i] = name[0] == 'm' && strstr(name, "norm") ? 0x3F80 : rnd_bf16();
        if (oct_st_writer_append(w, name, buf, n * 2, err) != OCT_OK)
            return 1;
        done += n;
    }
    return 0;
}

static int make_checkpoint(const char *dir, shape s)
{
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f,
            "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
            "\"hidden_size\": %lld, \"intermediate_size\": %lld, \"num_hidden_layers\": %lld, "
            "\"num_attention_heads\": %lld, \"num_key_value_heads\": %lld, \"vocab_size\": %lld, "
            "\"max_position_embeddings\": 256, \"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0, "
            "\"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"torch_dtype\": "
            "\"bfloat16\"}\n",
            (long long)s.hidden, (long long)s.inter, (long long)s.layers,
            (long long)(s.hidden / 128), (long long)(s.hidden / 256), (long long)s.vocab);
    fclose(f);
    oct_st_writer *w = NULL;
    oct_error err;
    if (oct_st_writer_create(dir, "model", 0, &w, &err) != OCT_OK)
        return 1;
    struct {
        char name[128];
        int64_t r, c;
    } t[16 * 64];
    int nt = 0;
#define ADD(R, C, ...)                                                                             \
    do {                                                                                           \
        snprintf(t[nt].name, sizeof t[nt].name, __VA_ARGS__);                                      \
        t[nt].r = (R);                                                                             \
        t[nt].c = (C);                                                                             \
        nt++;                                                                                      \
    } while (0)
    int64_t H = s.hidden, I = s.inter, kv = s.hidden / 2;
    ADD(s.vocab, H, "lm_head.weight");
    ADD(s.vocab, H, "model.embed_tokens.weight");
    for (int64_t l = 0; l < s.layers; l++) {
        ADD(1, H, "model.layers.%lld.input_layernorm.weight", (long long)l);
        ADD(H, I, "model.layers.%lld.mlp.down_proj.weight", (long long)l);
        ADD(I, H, "model.layers.%lld.mlp.gate_proj.weight", (long long)l);
        ADD(I, H, "model.layers.%lld.mlp.up_proj.weight", (long long)l);
        ADD(1, H, "model.layers.%lld.post_attention_layernorm.weight", (long long)l);
        ADD(kv, H, "model.layers.%lld.self_attn.k_proj.weight", (long long)l);
        ADD(H, H, "model.layers.%lld.self_attn.o_proj.weight", (long long)l);
        ADD(H, H, "model.layers.%lld.self_attn.q_proj.weight", (long long)l);
        ADD(kv, H, "model.layers.%lld.self_attn.v_proj.weight", (long long)l);
    }
    ADD(1, H, "model.norm.weight");
    int rc = 0;
    for (int i = 0; i < nt && !rc; i++) {
        int64_t dims[2] = {t[i].r, t[i].c};
        int nd = t[i].r == 1 ? 1 : 2;
        rc = oct_st_writer_declare(w, t[i].name, OCT_DT_BF16, nd, nd == 1 ? dims + 1 : dims,
                                   &err) != OCT_OK;
    }
    rc = rc || oct_st_writer_begin(w, &err) != OCT_OK;
    size_t be = 1 << 20;
    uint16_t *buf = malloc(be * 2);
    for (int i = 0; i < nt && !rc; i++)
        rc = write_tensor(w, t[i].name, t[i].r, t[i].c, buf, be, &err);
    free(buf);
    rc = rc || oct_st_writer_finish(w, &err) != OCT_OK;
    if (rc)
        fprintf(stderr, "writing the checkpoint: %s\n", err.message);
    oct_st_writer_free(w);
    return rc;
}

/* Child mode (a fresh exec of this binary, so its peak RSS is its own): load
 * with fp8_per_block and print model bytes, largest unit (BF16), predicted
 * and measured peak. */
static int child_main(const char *dir)
{
    oct_model_opts o;
    memset(&o, 0, sizeof o);
    o.quantization = "fp8_per_block";
    oct_model *m = NULL;
    oct_error err;
    if (oct_model_load(dir, &o, &m, &err) != OCT_OK) {
        fprintf(stderr, "child load: %s\n", err.message);
        return 1;
    }
    const oct_plan *p = oct_model_get_plan(m);
    uint64_t largest = 0;
    for (int64_t i = 0; i < oct_plan_n_layers(p); i++) {
        const oct_plan_layer *l = oct_plan_layer_at(p, i);
        uint64_t u = 0; /* the fused unit in BF16: sum of its shards */
        for (int64_t j = 0; j < oct_plan_n_layers(p); j++)
            if (strcmp(oct_plan_layer_at(p, j)->group, l->group) == 0)
                u += 2u * (uint64_t)oct_plan_layer_at(p, j)->n * (uint64_t)oct_plan_layer_at(p, j)->k;
        largest = u > largest ? u : largest;
    }
    printf("%llu %llu %llu %llu\n", (unsigned long long)oct_plan_model_bytes(p),
           (unsigned long long)largest, (unsigned long long)oct_plan_peak_bytes(p),
           (unsigned long long)oct_model_load_peak_bytes(m));
    oct_model_free(m);
    return 0;
}

static int load_in_child(const char *dir, uint64_t out[4])
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/proc/%d/exe --load-child '%s'", (int)getpid(), dir);
    FILE *f = popen(cmd, "r");
    if (!f)
        return 1;
    unsigned long long v[4];
    int n = fscanf(f, "%llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3]);
    int rc = pclose(f);
    for (int i = 0; i < 4; i++)
        out[i] = n == 4 ? v[i] : 0;
    return n == 4 && rc == 0 ? 0 : 1;
}

static void test_peak_memory_of_online_quantization(void)
{
    /* ~1.0 GB BF16: 9 layers of hidden 2048 / intermediate 5632, vocab 8192 */
    shape s = UNDER_ASAN ? (shape){512, 1408, 2, 2048} : (shape){2048, 5632, 9, 8192};
    char dir[] = "/tmp/octet_memtest_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    REQUIRE(make_checkpoint(dir, s) == 0);
    uint64_t r[4];
    int rc = load_in_child(dir, r);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    REQUIRE(rc == 0 && r[0] > 0);
    double bound = ((double)r[0] + (double)r[1]) * 1.10;
    printf("  checkpoint %.0f MB BF16 -> model %.1f MB FP8; largest unit %.1f MB BF16; peak "
           "predicted %.1f MB, measured %.1f MB; bound %.1f MB%s\n",
           (double)(s.layers * (4 * s.hidden * s.hidden - s.hidden * s.hidden + 3 * s.hidden * s.inter) * 2 +
                    2 * s.vocab * s.hidden * 2) / 1e6,
           (double)r[0] / 1e6, (double)r[1] / 1e6, (double)r[2] / 1e6, (double)r[3] / 1e6,
           bound / 1e6, UNDER_ASAN ? " (not checked under ASan)" : "");
    if (!UNDER_ASAN)
        CHECKF((double)r[3] <= bound, "peak RSS %.1f MB > FP8 model + largest BF16 layer + 10%% "
               "= %.1f MB", (double)r[3] / 1e6, bound / 1e6);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--load-child") == 0)
        return child_main(argv[2]);
    RUN(test_peak_memory_of_online_quantization);
    return testlib_finish();
}
