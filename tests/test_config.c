/* test_config.c — config.json parsing: sizes and defaults, rope settings
 * (rope_scaling and transformers 5 rope_parameters), text_config wrappers,
 * the keys only some families use (sliding window, Granite multipliers, MoE
 * routing; read from the published configs in tests/fixtures), and errors
 * that name the key. */
#include <stdio.h>
#include <string.h>

#include "octet.h"
#include "testlib.h"

static oct_status parse(const char *js, oct_model_config *c, oct_error *err)
{
    oct_error_clear(err);
    return oct_model_config_parse(js, strlen(js), "config.json", c, err);
}

static void test_llama3(void)
{
    oct_model_config c;
    oct_error err;
    const char *js =
        "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":2048,"
        "\"intermediate_size\":8192,\"num_hidden_layers\":16,\"num_attention_heads\":32,"
        "\"num_key_value_heads\":8,\"vocab_size\":128256,\"max_position_embeddings\":131072,"
        "\"rms_norm_eps\":1e-05,\"rope_theta\":500000.0,\"rope_scaling\":{\"factor\":32.0,"
        "\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,\"original_max_position_embeddings\":"
        "8192,\"rope_type\":\"llama3\"},\"tie_word_embeddings\":true,\"torch_dtype\":\"bfloat16\","
        "\"bos_token_id\":128000,\"eos_token_id\":[128001,128008,128009]}";
    CHECK_OK(parse(js, &c, &err));
    CHECK(!strcmp(c.architecture, "LlamaForCausalLM") && !strcmp(c.model_type, "llama"));
    CHECK(c.hidden_size == 2048 && c.n_layers == 16 && c.n_heads == 32 && c.n_kv_heads == 8);
    CHECK(c.head_dim == 64 && c.vocab_size == 128256);
    CHECK(!strcmp(c.rope_type, "llama3") && c.rope_factor == 32.0 &&
          c.rope_low_freq_factor == 1.0 && c.rope_high_freq_factor == 4.0 &&
          c.rope_original_max_position_embeddings == 8192);
    CHECK(c.rope_theta == 500000.0 && c.rms_norm_eps == 1e-5);
    CHECK(c.tie_word_embeddings && c.torch_dtype == OCT_DT_BF16 && !c.has_quantization_config);
    CHECK(c.bos_token_id == 128000 && c.n_eos == 3 && c.eos_token_ids[2] == 128009);
}

static void test_defaults_and_wrappers(void)
{
    oct_model_config c;
    oct_error err;
    CHECK_OK(parse("{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                   "\"vocab_size\":100,\"rope_parameters\":{\"rope_type\":\"default\","
                   "\"rope_theta\":1000.0},\"dtype\":\"float16\","
                   "\"quantization_config\":{\"quant_method\":\"fp8\"}}",
                   &c, &err));
    CHECK(c.n_kv_heads == 4 && c.head_dim == 16 && c.rope_theta == 1000.0);
    CHECK(c.torch_dtype == OCT_DT_F16 && c.has_quantization_config && c.bos_token_id == -1);
    CHECK(!strcmp(c.hidden_act, "silu"));
    CHECK_OK(parse("{\"architectures\":[\"X\"],\"text_config\":{\"hidden_size\":32,"
                   "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"vocab_size\":10,"
                   "\"head_dim\":32}}",
                   &c, &err));
    CHECK(c.hidden_size == 32 && c.head_dim == 32);
}

static void load(const char *path, oct_model_config *c)
{
    oct_error err;
    oct_error_clear(&err);
    CHECKF(oct_model_config_load(path, c, &err) == OCT_OK, "%s: %s", path, err.message);
}

static void test_family_keys(void)
{
    oct_model_config c;
    load("tests/fixtures/hf_configs/granite-3.3-8b-instruct/config.json", &c);
    CHECK(c.embedding_multiplier == 12.0 && c.residual_multiplier == 0.22 &&
          c.attention_multiplier == 0.0078125 && c.logits_scaling == 16.0);
    CHECK(c.sliding_window == 0 && !c.use_sliding_window && !c.attention_bias);
    load("tests/fixtures/models/model_granite/config.json", &c);
    CHECK(c.embedding_multiplier == 12.0 && c.logits_scaling == 8.0);
    load("tests/fixtures/hf_configs/mistral-7b-v0.1/config.json", &c);
    CHECK(c.sliding_window == 4096 && !c.use_sliding_window);
    load("tests/fixtures/hf_configs/mistral-7b-instruct-v0.3/config.json", &c); /* null */
    CHECK(c.sliding_window == 0);
    load("tests/fixtures/hf_configs/qwen2.5-7b-instruct/config.json", &c);
    CHECK(c.sliding_window == 131072 && !c.use_sliding_window);
    /* absent: the defaults (a Llama config has none of these keys) */
    CHECK(c.embedding_multiplier == 1.0 && c.residual_multiplier == 1.0 &&
          c.attention_multiplier == 0.0 && c.logits_scaling == 1.0);
    load("tests/fixtures/hf_configs/qwen3-30b-a3b/config.json", &c);
    CHECK(c.norm_topk_prob && c.decoder_sparse_step == 1 && c.n_mlp_only_layers == 0);
    CHECK(c.shared_expert_intermediate_size == 0 && c.sliding_window == 0);
    load("tests/fixtures/models/model_qwen3_moe/config.json", &c);
    CHECK(!c.norm_topk_prob && c.decoder_sparse_step == 1 && c.n_mlp_only_layers == 0);
    load("tests/fixtures/hf_configs/llama-3.1-8b-instruct/config.json", &c);
    CHECK(c.sliding_window == 0 && !c.norm_topk_prob && c.decoder_sparse_step == 1 &&
          c.embedding_multiplier == 1.0 && c.shared_intermediate_size == 0);

    oct_error err;
    CHECK_OK(parse("{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                   "\"vocab_size\": 100, \"use_sliding_window\": true, \"sliding_window\": 8, "
                   "\"mlp_only_layers\": [0, 1], \"decoder_sparse_step\": 2, "
                   "\"shared_intermediate_size\": 128}",
                   &c, &err));
    CHECK(c.use_sliding_window && c.sliding_window == 8 && c.n_mlp_only_layers == 2 &&
          c.decoder_sparse_step == 2 && c.shared_intermediate_size == 128);
    /* text_config wins, as for the sizes */
    CHECK_OK(parse("{\"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 2, "
                   "\"num_attention_heads\": 4, \"vocab_size\": 100, \"logits_scaling\": 4}, "
                   "\"logits_scaling\": 2}",
                   &c, &err));
    CHECK(c.logits_scaling == 4.0);
}

/* `extra` appended to a valid config gives OCT_ERR_FORMAT with `want` in
 * the message. */
static void expect_format_error(const char *extra, const char *want)
{
    char js[512];
    snprintf(js, sizeof js,
             "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
             "\"vocab_size\": 100, %s}",
             extra);
    oct_model_config c;
    oct_error err;
    oct_status st = parse(js, &c, &err);
    CHECKF(st == OCT_ERR_FORMAT && strstr(err.message, want), "%s: status %d '%s', want '%s'",
           extra, st, st ? err.message : "", want);
}

static void test_family_key_errors(void)
{
    expect_format_error("\"sliding_window\": 0",
                        "config.json.sliding_window: 0 (a window is positive; null for none)");
    expect_format_error("\"sliding_window\": -4", "sliding_window: -4");
    expect_format_error("\"sliding_window\": 8589934593",
                        "sliding_window: 8589934593 is out of range");
    expect_format_error("\"sliding_window\": \"4096\"",
                        "config.json.sliding_window: line 1: expected an integer");
    expect_format_error("\"use_sliding_window\": 1", "use_sliding_window");
    expect_format_error(
        "\"embedding_multiplier\": 0",
        "config.json.embedding_multiplier: 0 (a multiplier is positive and finite)");
    expect_format_error("\"residual_multiplier\": -0.5", "residual_multiplier: -0.5");
    expect_format_error("\"attention_multiplier\": NaN", "attention_multiplier: nan");
    expect_format_error("\"logits_scaling\": Infinity", "logits_scaling: inf");
    expect_format_error("\"logits_scaling\": 1e300", "logits_scaling: 1e+300");
    expect_format_error("\"embedding_multiplier\": \"12\"",
                        "config.json.embedding_multiplier: line 1: expected a number");
    expect_format_error("\"norm_topk_prob\": \"yes\"", "norm_topk_prob");
    expect_format_error("\"decoder_sparse_step\": 1.5", "decoder_sparse_step");
    expect_format_error("\"mlp_only_layers\": 3",
                        "mlp_only_layers: line 1: expected a list of layer indices");
    expect_format_error("\"shared_expert_intermediate_size\": -1",
                        "shared_expert_intermediate_size: -1 is out of range");
    expect_format_error("\"shared_intermediate_size\": 2097152",
                        "shared_intermediate_size: 2097152 is out of range");
}

static void test_errors(void)
{
    oct_model_config c;
    oct_error err;
    /* counts far beyond any model are refused before anything is sized from them
     * (a Mixtral config with 2^39 layers and 11184808 experts once wrapped a
     * product in the load plan) */
    CHECK(parse("{\"architectures\": [\"MixtralForCausalLM\"], \"hidden_size\": 64, "
                "\"num_hidden_layers\": 549755813888, \"num_attention_heads\": 4, "
                "\"vocab_size\": 100, \"num_local_experts\": 8}",
                &c, &err) == OCT_ERR_FORMAT);
    CHECKF(strstr(err.message, "num_hidden_layers: 549755813888 is out of range") != NULL, "%s",
           err.message);
    CHECK(parse("{\"architectures\": [\"MixtralForCausalLM\"], \"hidden_size\": 64, "
                "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 100, "
                "\"num_local_experts\": 11184808, \"num_experts_per_tok\": 2}",
                &c, &err) == OCT_ERR_FORMAT);
    CHECKF(strstr(err.message, "n_routed_experts: 11184808 is out of range") != NULL, "%s",
           err.message);
    /* values that would silently give NaN logits */
    CHECK(parse("{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                "\"vocab_size\": 100, \"rms_norm_eps\": -1}",
                &c, &err) == OCT_ERR_FORMAT);
    CHECKF(strstr(err.message, "rms_norm_eps (-1) and rope_theta (10000) must be positive") != NULL,
           "%s", err.message);
    CHECK(parse("{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                "\"vocab_size\": 100, \"rope_theta\": 0}",
                &c, &err) == OCT_ERR_FORMAT);
    CHECK(parse("{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                "\"vocab_size\": 100, \"rms_norm_eps\": NaN}",
                &c, &err) == OCT_ERR_FORMAT);
    /* a context length of 0 or below (serve sized its KV pool as 0 MB from it) */
    for (int i = 0; i < 2; i++) {
        char j[256];
        snprintf(j, sizeof j,
                 "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                 "\"vocab_size\": 100, \"max_position_embeddings\": %d}",
                 i ? -5 : 0);
        CHECK(parse(j, &c, &err) == OCT_ERR_FORMAT);
        CHECKF(strstr(err.message, "max_position_embeddings") != NULL, "%s", err.message);
    }
    CHECK(parse("{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                "\"vocab_size\": 100, \"max_position_embeddings\": 4611686018427387904}",
                &c, &err) == OCT_ERR_FORMAT);
    CHECK(parse("{\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100}", &c,
                &err) == OCT_ERR_FORMAT);
    CHECK(strstr(err.message, "config.json.hidden_size: required key is missing") != NULL);
    CHECK(parse("{\"hidden_size\":\"64\",\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                "\"vocab_size\":100}",
                &c, &err) == OCT_ERR_FORMAT);
    CHECK(strstr(err.message, "config.json.hidden_size: line 1: expected an integer") != NULL);
    CHECK(parse("{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                "\"num_key_value_heads\":3,\"vocab_size\":100}",
                &c, &err) == OCT_ERR_FORMAT);
    CHECK(strstr(err.message, "not a multiple of num_key_value_heads") != NULL);
    CHECK(parse("{\"hidden_size\":64,\"num_hidden_layers\":-2,\"num_attention_heads\":4,"
                "\"vocab_size\":100}",
                &c, &err) == OCT_ERR_FORMAT);
    CHECK(strstr(err.message, "num_hidden_layers: -2 is out of range") != NULL);
    CHECK(parse("{\"hidden_size\":64,", &c, &err) == OCT_ERR_FORMAT);
    CHECK(strstr(err.message, "invalid JSON") != NULL);
    CHECK(parse("{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                "\"vocab_size\":100,\"torch_dtype\":\"int8\"}",
                &c, &err) == OCT_ERR_UNSUPPORTED);
    CHECK(strstr(err.message, "torch_dtype: 'int8'") != NULL);
    CHECK(parse("{\"a\":1,\"a\":2}", &c, &err) == OCT_ERR_FORMAT); /* duplicate keys */
}

int main(void)
{
    RUN(test_llama3);
    RUN(test_defaults_and_wrappers);
    RUN(test_family_keys);
    RUN(test_family_key_errors);
    RUN(test_errors);
    return testlib_finish();
}
