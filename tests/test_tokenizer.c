/* test_tokenizer.c — the tokenizer on small hand-built tokenizer.json files
 * whose expected ids follow from the BPE rules by hand, plus the internal
 * pieces (regex splitting, split behaviors, Unicode normalization, UTF-8). */
#include <jansson.h>

#include "octet.h"
#include "testlib.h"
#include "tokenizer/tok_internal.h"

/* ---------------------------------------------------------------- helpers */

/* A GPT-2 style byte-level tokenizer: ids 0..255 are the byte stand-ins in
 * byte order, then the merges below with ids 256.. in order. */
static const char *const k_bl_merges[][2] = {
    {"\xC4\xA0", "t"},  /* 256 Ġt */
    {"h", "e"},         /* 257 he */
    {"\xC4\xA0t", "he"}, /* 258 Ġthe */
    {"l", "l"},         /* 259 ll */
    {"ll", "o"},        /* 260 llo */
};

static char *bytelevel_json(bool ignore_merges, const char *added_extra)
{
    const tok_bytemap *bm = tok_bytemap_get();
    json_t *vocab = json_object();
    for (int b = 0; b < 256; b++) {
        char s[3] = {0};
        memcpy(s, bm->utf8[b], bm->utf8_len[b]);
        json_object_set_new(vocab, s, json_integer(b));
    }
    json_t *merges = json_array();
    for (size_t i = 0; i < OCT_ARRAY_LEN(k_bl_merges); i++) {
        char joined[32];
        snprintf(joined, sizeof joined, "%s%s", k_bl_merges[i][0], k_bl_merges[i][1]);
        json_object_set_new(vocab, joined, json_integer(256 + (json_int_t)i));
        json_t *pair = json_array();
        json_array_append_new(pair, json_string(k_bl_merges[i][0]));
        json_array_append_new(pair, json_string(k_bl_merges[i][1]));
        json_array_append_new(merges, pair);
    }
    json_t *model = json_pack("{s:s, s:o, s:o, s:b, s:b}", "type", "BPE", "vocab", vocab,
                              "merges", merges, "ignore_merges", ignore_merges, "byte_fallback",
                              0);
    char added[2048];
    snprintf(added, sizeof added,
             "[{\"id\": 300, \"content\": \"<|end|>\", \"special\": true, \"normalized\": false,"
             " \"lstrip\": false, \"rstrip\": false, \"single_word\": false}%s]",
             added_extra ? added_extra : "");
    json_error_t je;
    json_t *root = json_pack(
        "{s:s, s:o, s:n, s:{s:s, s:b, s:b, s:b}, s:{s:s}, s:{s:s, s:b, s:b, s:b}, s:o}",
        "version", "1.0", "added_tokens", json_loads(added, 0, &je), "normalizer",
        "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
        "use_regex", 1, "post_processor", "type", "ByteLevel", "decoder", "type", "ByteLevel",
        "add_prefix_space", 1, "trim_offsets", 1, "use_regex", 1, "model", model);
    char *s = json_dumps(root, 0);
    json_decref(root);
    return s;
}

static oct_tokenizer *load_str(const char *json, const char *config)
{
    oct_tokenizer *t = NULL;
    oct_error err;
    oct_status st = oct_tokenizer_load_json(json, strlen(json), config,
                                            config ? strlen(config) : 0, &t, &err);
    if (st != OCT_OK)
        fprintf(stderr, "load failed: %s\n", err.message);
    return t;
}

static bool ids_eq(const oct_token_ids *ids, const int32_t *want, int64_t n)
{
    if (ids->n != n)
        return false;
    for (int64_t i = 0; i < n; i++)
        if (ids->ids[i] != want[i])
            return false;
    return true;
}

static void print_ids(const char *what, const oct_token_ids *ids)
{
    fprintf(stderr, "  %s:", what);
    for (int64_t i = 0; i < ids->n; i++)
        fprintf(stderr, " %d", (int)ids->ids[i]);
    fprintf(stderr, "\n");
}

#define CHECK_ENC(tok, text, special, ...)                                                 \
    do {                                                                                   \
        const int32_t want_[] = {__VA_ARGS__};                                             \
        oct_token_ids got_ = {0};                                                          \
        oct_error e_;                                                                      \
        CHECK_OK(oct_tokenizer_encode(tok, text, strlen(text), special, &got_, &e_));      \
        bool ok_ = ids_eq(&got_, want_, (int64_t)OCT_ARRAY_LEN(want_));                    \
        CHECKF(ok_, "encode(\"%s\")", text);                                              \
        if (!ok_)                                                                          \
            print_ids("got", &got_);                                                       \
        oct_token_ids_free(&got_);                                                         \
    } while (0)

static void check_decode(const oct_tokenizer *t, const int32_t *ids, int64_t n, bool skip,
                         const char *want)
{
    char *s = NULL;
    oct_error e;
    CHECK_OK(oct_tokenizer_decode(t, ids, n, skip, &s, NULL, &e));
    CHECKF(s && strcmp(s, want) == 0, "decode: got '%s' want '%s'", s ? s : "(null)", want);
    oct_tokenizer_text_free(s);
}

/* ------------------------------------------------------------------ tests */

static void test_bytelevel_bpe(void)
{
    char *j = bytelevel_json(false, NULL);
    oct_tokenizer *t = load_str(j, NULL);
    free(j);
    REQUIRE(t);
    /* "the" -> t + he (no "t he" merge); " hello" -> Ġ he llo */
    CHECK_ENC(t, "the hello", true, 't', 257, 32 + 256 - 256 + 256 - 32 + 32 - 256 + 256 - 256 + 256 - 256 + 288 - 288 + 256 - 256 + 256 - 256 + 256 - 256 + 256 - 256 + 288 - 288 + 256 - 256 - 256 + 256 - 256 + 256 + 0 - 256 + 256 - 256, 257, 260);
    oct_tokenizer_free(t);
}
