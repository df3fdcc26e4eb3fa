/* test_json.c — src/io/json.c, the reader of Hugging Face JSON: what
 * Python's json module writes (integers of any size, NaN / Infinity /
 * -Infinity, deep nesting) parses; the getters read it as transformers does;
 * a wrong type names the file, key and line; io_json_dump writes the tokens
 * back unchanged; and the real tokenizer_config.json shape that carries
 * transformers' int(1e30) loads. */
#include <math.h>

#include "io/json.h"
#include "octet.h"
#include "testlib.h"

static json_t *open_text(const char *text)
{
    json_t *root = NULL;
    oct_error err;
    oct_status st = io_json_open(text, strlen(text), "t/config.json", &root, &err);
    CHECKF(st == OCT_OK, "%s", err.message);
    return root;
}

static void test_big_integers(void)
{
    json_t *r = open_text("{\"model_max_length\": 1000000000000000019884624838656,\n"
                          " \"neg\": -99999999999999999999, \"max\": 9223372036854775807,\n"
                          " \"over\": 9223372036854775808, \"min\": -9223372036854775808}");
    REQUIRE(r);
    oct_error err;
    int64_t v = 0;
    CHECK(io_json_limit(r, "model_max_length", "t/config.json", true, &v, &err) == OCT_OK &&
          v == INT64_MAX);
    double d = 0;
    CHECK(io_json_num(r, "model_max_length", "t/config.json", true, &d, &err) == OCT_OK &&
          d == 1e30);
    CHECK(io_json_int(r, "model_max_length", "t/config.json", true, &v, &err) == OCT_ERR_FORMAT);
    CHECKF(strstr(err.message, "t/config.json.model_max_length: line 1: expected an integer "
                               "that fits in 64 bits") != NULL,
           "%s", err.message);
    CHECK(io_json_num(r, "neg", "t", true, &d, &err) == OCT_OK && d == -1e20);
    CHECK(io_json_int(r, "max", "t", true, &v, &err) == OCT_OK && v == INT64_MAX);
    CHECK(io_json_int(r, "min", "t", true, &v, &err) == OCT_OK && v == INT64_MIN);
    CHECK(io_json_int(r, "over", "t", true, &v, &err) == OCT_ERR_FORMAT);
    CHECKF(strstr(err.message, "t/config.json: line 3: t.over: expected") != NULL, "%s",
           err.message);
    /* A limit that fits is an ordinary integer. */
    json_t *s = open_text("{\"model_max_length\": 131072, \"bad\": \"x\"}");
    CHECK(io_json_limit(s, "model_max_length", "c", true, &v, &err) == OCT_OK && v == 131072);
    CHECK(io_json_limit(s, "bad", "c", true, &v, &err) == OCT_ERR_FORMAT);
    io_json_close(s);
    io_json_close(r);
    /* Beyond the double range: +-Infinity as a number. */
    char big[900] = "{\"x\": ";
    for (int i = 0; i < 400; i++)
        strcat(big, "9");
    strcat(big, ", \"y\": -");
    for (int i = 0; i < 400; i++)
        strcat(big, "1");
    strcat(big, "}");
    r = open_text(big);
    REQUIRE(r);
    CHECK(io_json_num(r, "x", "t", true, &d, &err) == OCT_OK && isinf(d) && d > 0);
    CHECK(io_json_num(r, "y", "t", true, &d, &err) == OCT_OK && isinf(d) && d < 0);
    io_json_close(r);
}

static void test_nonfinite_literals(void)
{
    json_t *r =
        open_text("{\"a\": NaN, \"b\": Infinity, \"c\": -Infinity,\n"
                  "\"list\": [NaN, 1.5, -Infinity], \"NaN\": \"NaN\", \"s\": \"Infinity\"}");
    REQUIRE(r);
    oct_error err;
    double d = 0;
    CHECK(io_json_num(r, "a", "t", true, &d, &err) == OCT_OK && isnan(d));
    CHECK(io_json_num(r, "b", "t", true, &d, &err) == OCT_OK && isinf(d) && d > 0);
    CHECK(io_json_num(r, "c", "t", true, &d, &err) == OCT_OK && isinf(d) && d < 0);
    CHECK(io_json_number_of(json_array_get(json_object_get(r, "list"), 0), &d) && isnan(d));
    CHECK(io_json_number_of(json_array_get(json_object_get(r, "list"), 2), &d) && d < 0);
    /* Strings and keys that spell the literals stay strings. */
    const char *s = NULL;
    CHECK(io_json_str(r, "NaN", "t", true, &s, &err) == OCT_OK && strcmp(s, "NaN") == 0);
    CHECK(io_json_str(r, "s", "t", true, &s, &err) == OCT_OK && strcmp(s, "Infinity") == 0);
    CHECK(!io_json_number_of(json_object_get(r, "s"), &d));
    /* A literal where a string or integer belongs is the wrong type. */
    int64_t v;
    CHECK(io_json_str(r, "a", "t", true, &s, &err) == OCT_ERR_FORMAT);
    CHECK(io_json_int(r, "b", "t", true, &v, &err) == OCT_ERR_FORMAT);
    io_json_close(r);
}

static void test_round_trip_dump(void)
{
    const char *text = "{\"a\": NaN, \"b\": [Infinity, -Infinity], "
                       "\"m\": 1000000000000000019884624838656, \"n\": 7}";
    json_t *r = open_text(text);
    REQUIRE(r);
    char *out = io_json_dump(r, JSON_COMPACT | JSON_PRESERVE_ORDER);
    REQUIRE(out);
    CHECKF(strcmp(out, "{\"a\":NaN,\"b\":[Infinity,-Infinity],"
                       "\"m\":1000000000000000019884624838656,\"n\":7}") == 0,
           "%s", out);
    oct_free(out);
    io_json_close(r);
}

static void test_nesting(void)
{
    enum { DEEP = 1500 };
    char *t = malloc(2 * DEEP + 16);
    REQUIRE(t);
    size_t n = 0;
    for (int i = 0; i < DEEP; i++)
        t[n++] = '[';
    t[n++] = '1';
    for (int i = 0; i < DEEP; i++)
        t[n++] = ']';
    json_t *r = NULL;
    oct_error err;
    CHECKF(io_json_open(t, n, "deep.json", &r, &err) == OCT_OK, "%s", err.message);
    io_json_close(r);
    free(t);
    /* Far deeper than anything Python writes: a clean error, not a crash. */
    enum { TOO_DEEP = 100000 };
    t = malloc(TOO_DEEP + 1);
    REQUIRE(t);
    memset(t, '[', TOO_DEEP);
    CHECK(io_json_open(t, TOO_DEEP, "deeper.json", &r, &err) == OCT_ERR_FORMAT && r == NULL);
    CHECKF(strstr(err.message, "deeper.json: invalid JSON: line 1") != NULL, "%s", err.message);
    free(t);
}

static void test_type_error_lines(void)
{
    const char *text = "{\n"
                       "  \"architectures\": [\"LlamaForCausalLM\"],\n"
                       "  \"hidden_size\": 64,\n"
                       "  \"rope_scaling\": {\n"
                       "    \"rope_type\": \"llama3\",\n"
                       "    \"factor\": \"eight\"\n"
                       "  },\n"
                       "  \"tie_word_embeddings\": 1\n"
                       "}\n";
    json_t *r = open_text(text);
    REQUIRE(r);
    oct_error err;
    double d;
    bool b;
    CHECK(io_json_num(json_object_get(r, "rope_scaling"), "factor", "config.json.rope_scaling",
                      true, &d, &err) == OCT_ERR_FORMAT);
    CHECKF(strstr(err.message, "t/config.json: line 6: config.json.rope_scaling.factor: "
                               "expected a number") != NULL,
           "%s", err.message);
    CHECK(io_json_bool(r, "tie_word_embeddings", "t/config.json", true, &b, &err) ==
          OCT_ERR_FORMAT);
    CHECKF(strstr(err.message, "t/config.json.tie_word_embeddings: line 8: expected true or "
                               "false") != NULL,
           "%s", err.message);
    io_json_close(r);
    /* Syntax errors name the file with line and column; a truncated file too. */
    json_t *bad = NULL;
    CHECK(io_json_open("{\"a\": 1,\n \"b\": }", 16, "x.json", &bad, &err) == OCT_ERR_FORMAT);
    CHECKF(strstr(err.message, "x.json: invalid JSON: line 2 column") != NULL, "%s", err.message);
    CHECK(io_json_open("{\"a\": [1, 2", 11, "x.json", &bad, &err) == OCT_ERR_FORMAT && !bad);
}

/* tokenizer_config.json as transformers' save_pretrained writes it without a
 * max length, with NaN in an unused field and the AddedToken object form. */
static void test_tokenizer_config_big_max_length(void)
{
    const char *tj = "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":"
                     "[{\"id\":3,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,"
                     "\"rstrip\":false,\"normalized\":false,\"special\":true}],"
                     "\"normalizer\":null,\"pre_tokenizer\":null,\"post_processor\":null,"
                     "\"decoder\":null,\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":"
                     "null,\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
                     "\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,"
                     "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}}";
    const char *cj = "{\n  \"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<s>\"},\n"
                     "  \"clean_up_tokenization_spaces\": false,\n"
                     "  \"model_max_length\": 1000000000000000019884624838656,\n"
                     "  \"some_float\": NaN,\n"
                     "  \"tokenizer_class\": \"PreTrainedTokenizerFast\"\n}\n";
    oct_tokenizer *tok = NULL;
    oct_error err;
    CHECKF(oct_tokenizer_load_json(tj, strlen(tj), cj, strlen(cj), &tok, &err) == OCT_OK, "%s",
           err.message);
    CHECK(tok && oct_tokenizer_bos_id(tok) == 3);
    oct_tokenizer_free(tok);
    const char *bad = "{\n  \"bos_token\": \"<s>\",\n  \"add_bos_token\": \"yes\"\n}";
    CHECK(oct_tokenizer_load_json(tj, strlen(tj), bad, strlen(bad), &tok, &err) == OCT_ERR_FORMAT);
    CHECKF(strstr(err.message, "tokenizer_config.json.add_bos_token: line 3: expected true or "
                               "false") != NULL,
           "%s", err.message);
}

/* special_tokens_map.json (as older repos ship it) fills the tokens
 * tokenizer_config.json leaves out; tokenizer_config.json wins where both say. */
static void test_special_tokens_map(void)
{
    const char *dir = "build/tests/special_tokens_map";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp models/demo/tokenizer.json %s/", dir, dir);
    REQUIRE(system(cmd) == 0);
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("{\"eos_token\": \"<|end_of_text|>\", \"model_max_length\": "
          "1000000000000000019884624838656}\n",
          f);
    fclose(f);
    snprintf(path, sizeof path, "%s/special_tokens_map.json", dir);
    f = fopen(path, "w");
    REQUIRE(f);
    fputs("{\n  \"bos_token\": {\"content\": \"<|begin_of_text|>\", \"lstrip\": false},\n"
          "  \"eos_token\": \"<|begin_of_text|>\"\n}\n",
          f);
    fclose(f);
    oct_tokenizer *tok = NULL;
    oct_error err;
    CHECKF(oct_tokenizer_load(dir, &tok, &err) == OCT_OK, "%s", err.message);
    REQUIRE(tok);
    CHECK(strcmp(oct_tokenizer_bos_token(tok), "<|begin_of_text|>") == 0);
    CHECK(strcmp(oct_tokenizer_eos_token(tok), "<|end_of_text|>") == 0);
    CHECK(oct_tokenizer_bos_id(tok) >= 0 && oct_tokenizer_eos_id(tok) >= 0 &&
          oct_tokenizer_bos_id(tok) != oct_tokenizer_eos_id(tok));
    oct_tokenizer_free(tok);
    /* a wrong type there names that file and the line */
    f = fopen(path, "w");
    REQUIRE(f);
    fputs("{\n  \"bos_token\": 7\n}\n", f);
    fclose(f);
    CHECK(oct_tokenizer_load(dir, &tok, &err) == OCT_ERR_FORMAT && tok == NULL);
    CHECKF(strstr(err.message, "special_tokens_map.json: line 2") != NULL, "%s", err.message);
}

int main(void)
{
    RUN(test_big_integers);
    RUN(test_nonfinite_literals);
    RUN(test_round_trip_dump);
    RUN(test_nesting);
    RUN(test_type_error_lines);
    RUN(test_tokenizer_config_big_max_length);
    RUN(test_special_tokens_map);
    return testlib_finish();
}
