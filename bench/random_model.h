/* random_model.h — writes a random-weight BF16 Llama checkpoint (config.json +
 * model.safetensors) of a given shape, streamed through the library's
 * safetensors writer; used by the load-memory test and the model benchmark.
 * Weights are small random bf16 values (norm weights 1.0). */
#ifndef OCTET_RANDOM_MODEL_H
#define OCTET_RANDOM_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octet.h"

typedef struct shape {
    int64_t hidden, inter, layers, vocab;
    int64_t heads, kv_heads; /* head_dim = hidden / heads */
} shape;

static uint64_t rm_rng = 0x1234567;

static uint16_t rm_bf16(void)
{
    rm_rng = rm_rng * 6364136223846793005ull + 1442695040888963407ull;
    /* small random values: sign, exponent 2^-9..2^-5, random mantissa */
    uint32_t r = (uint32_t)(rm_rng >> 33);
    uint32_t e = 118u + (r & 3u);
    return (uint16_t)((((r >> 2) & 1u) << 15) | (e << 7) | ((r >> 3) & 0x7Fu));
}

static int rm_write_tensor(oct_st_writer *w, const char *name, int64_t rows, int64_t cols,
                           uint16_t *buf, size_t buf_elems, oct_error *err)
{
    size_t total = (size_t)(rows * cols);
    for (size_t done = 0; done < total;) {
        size_t n = total - done < buf_elems ? total - done : buf_elems;
        for (size_t i = 0; i < n; i++)
            buf[i] = name[0] == 'm' && strstr(name, "norm") ? 0x3F80 : rm_bf16();
        if (oct_st_writer_append(w, name, buf, n * 2, err) != OCT_OK)
            return 1;
        done += n;
    }
    return 0;
}

static int random_model_write(const char *dir, shape s)
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
            (long long)s.hidden, (long long)s.inter, (long long)s.layers, (long long)s.heads,
            (long long)s.kv_heads, (long long)s.vocab);
    fclose(f);
    oct_st_writer *w = NULL;
    oct_error err;
    if (oct_st_writer_create(dir, "model", 0, &w, &err) != OCT_OK)
        return 1;
    struct {
        char name[128];
        int64_t r, c;
    } t[16 * 128];
    int nt = 0;
#define ADD(R, C, ...)                                                                             \
    do {                                                                                           \
        snprintf(t[nt].name, sizeof t[nt].name, __VA_ARGS__);                                      \
        t[nt].r = (R);                                                                             \
        t[nt].c = (C);                                                                             \
        nt++;                                                                                      \
    } while (0)
    int64_t H = s.hidden, I = s.inter, kv = s.hidden / s.heads * s.kv_heads;
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
        rc = rm_write_tensor(w, t[i].name, t[i].r, t[i].c, buf, be, &err);
    free(buf);
    rc = rc || oct_st_writer_finish(w, &err) != OCT_OK;
    if (rc)
        fprintf(stderr, "writing the checkpoint: %s\n", err.message);
    oct_st_writer_free(w);
    return rc;
}

#endif
