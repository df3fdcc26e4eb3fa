/* test_config.c — config.json parsing: sizes and defaults, rope settings
 * (rope_scaling and transformers 5 rope_parameters), text_config wrappers,
 * and errors that name the key. */
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
    RUN(test_errors);
    return testlib_finish();
}
