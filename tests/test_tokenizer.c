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
    {"\xC4\xA0", "t"},   /* 256 Ġt */
    {"h", "e"},          /* 257 he */
    {"\xC4\xA0t", "he"}, /* 258 Ġthe */
    {"l", "l"},          /* 259 ll */
    {"ll", "o"},         /* 260 llo */
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
    json_t *model = json_pack("{s:s, s:o, s:o, s:b, s:b}", "type", "BPE", "vocab", vocab, "merges",
                              merges, "ignore_merges", ignore_merges, "byte_fallback", 0);
    char added[2048];
    snprintf(added, sizeof added,
             "[{\"id\": 300, \"content\": \"<|end|>\", \"special\": true, \"normalized\": false,"
             " \"lstrip\": false, \"rstrip\": false, \"single_word\": false}%s]",
             added_extra ? added_extra : "");
    json_error_t je;
    json_t *root = json_pack(
        "{s:s, s:o, s:n, s:{s:s, s:b, s:b, s:b}, s:{s:s}, s:{s:s, s:b, s:b, s:b}, s:o}", "version",
        "1.0", "added_tokens", json_loads(added, 0, &je), "normalizer", "pre_tokenizer", "type",
        "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 1, "post_processor",
        "type", "ByteLevel", "decoder", "type", "ByteLevel", "add_prefix_space", 1, "trim_offsets",
        1, "use_regex", 1, "model", model);
    char *s = json_dumps(root, 0);
    json_decref(root);
    return s;
}

static oct_tokenizer *load_str(const char *json, const char *config)
{
    oct_tokenizer *t = NULL;
    oct_error err;
    oct_status st =
        oct_tokenizer_load_json(json, strlen(json), config, config ? strlen(config) : 0, &t, &err);
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

#define CHECK_ENC(tok, text, special, ...)                                                         \
    do {                                                                                           \
        const int32_t want_[] = {__VA_ARGS__};                                                     \
        oct_token_ids got_ = {0};                                                                  \
        oct_error e_;                                                                              \
        CHECK_OK(oct_tokenizer_encode(tok, text, strlen(text), special, &got_, &e_));              \
        bool ok_ = ids_eq(&got_, want_, (int64_t)OCT_ARRAY_LEN(want_));                            \
        CHECKF(ok_, "encode(\"%s\")", text);                                                       \
        if (!ok_)                                                                                  \
            print_ids("got", &got_);                                                               \
        oct_token_ids_free(&got_);                                                                 \
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
    /* "the" -> t + he (no "t he" merge); " hello" -> Ġ(32) he llo */
    CHECK_ENC(t, "the hello", true, 't', 257, 32, 257, 260);
    /* " the" -> Ġt he -> Ġthe (ranks 0, 1, 2) */
    CHECK_ENC(t, " the", true, 258);
    /* bytes of é are two byte tokens */
    CHECK_ENC(t, "\xC3\xA9", true, 0xC3, 0xA9);
    /* GPT-2 regex: "'s" splits off, digits separate from letters, whitespace
     * run before a word keeps its last space for the word */
    CHECK_ENC(t, "it's 42  x", true, 'i', 't', '\'', 's', 32, '4', '2', 32, 32, 'x');
    /* added special token inside text, never split */
    CHECK_ENC(t, "a<|end|>b", true, 'a', 300, 'b');
    CHECK_ENC(t, "<|end|><|end|>", true, 300, 300);
    CHECK_EQ_INT(oct_tokenizer_vocab_size(t), 301);
    CHECK(oct_tokenizer_is_special(t, 300));
    CHECK(!oct_tokenizer_is_special(t, 257));
    CHECK_EQ_INT(oct_tokenizer_token_to_id(t, "he"), 257);
    CHECK_EQ_INT(oct_tokenizer_token_to_id(t, "<|end|>"), 300);
    CHECK(strcmp(oct_tokenizer_id_to_token(t, 258), "\xC4\xA0the") == 0);
    CHECK(oct_tokenizer_id_to_token(t, 299) == NULL);

    const int32_t ids[] = {'t', 257, 32, 257, 260, 300, 0xC3, 0xA9};
    check_decode(t, ids, 8, false, "the hello<|end|>\xC3\xA9");
    check_decode(t, ids, 8, true, "the hello\xC3\xA9");
    /* a lone continuation byte decodes to U+FFFD (from_utf8_lossy) */
    const int32_t bad[] = {'a', 0xA9, 0xE2, 0x82};
    check_decode(t, bad, 4, false, "a\xEF\xBF\xBD\xEF\xBF\xBD");
    oct_tokenizer_free(t);
}

static void test_empty_text_gives_no_ids(void)
{
    char *j = bytelevel_json(false, NULL);
    oct_tokenizer *t = load_str(j, NULL);
    free(j);
    REQUIRE(t);
    oct_token_ids ids = {0};
    oct_error e;
    CHECK_OK(oct_tokenizer_encode(t, "", 0, true, &ids, &e));
    CHECK_EQ_INT(ids.n, 0);
    /* invalid UTF-8 is refused with its offset */
    CHECK(oct_tokenizer_encode(t, "ab\xFF", 3, true, &ids, &e) == OCT_ERR_INVALID_ARG);
    CHECK_EQ_INT(e.offset, 2);
    oct_token_ids_free(&ids);
    oct_tokenizer_free(t);
}

static void test_ignore_merges(void)
{
    /* With ignore_merges, a piece that is itself a vocab entry is taken as is;
     * "Ġthe" also results from merges, so use "llo" as a word: without the
     * flag, l l o -> ll o -> llo anyway.  Add a vocab-only token instead. */
    char *j = bytelevel_json(true, NULL);
    json_error_t je;
    json_t *root = json_loads(j, 0, &je);
    free(j);
    json_t *vocab = json_object_get(json_object_get(root, "model"), "vocab");
    json_object_set_new(vocab, "xyz", json_integer(261));
    char *s = json_dumps(root, 0);
    json_decref(root);
    oct_tokenizer *t = load_str(s, NULL);
    REQUIRE(t);
    CHECK_ENC(t, "xyz", true, 261);
    oct_tokenizer_free(t);
    /* the same file without the flag: no merge builds "xyz" */
    root = json_loads(s, 0, &je);
    json_object_set_new(json_object_get(root, "model"), "ignore_merges", json_false());
    free(s);
    s = json_dumps(root, 0);
    json_decref(root);
    t = load_str(s, NULL);
    free(s);
    REQUIRE(t);
    CHECK_ENC(t, "xyz", true, 'x', 'y', 'z');
    oct_tokenizer_free(t);
}

static void test_added_token_strip(void)
{
    const char *extra = ", {\"id\": 301, \"content\": \"<mask>\", \"special\": true, "
                        "\"normalized\": false, \"lstrip\": true, \"rstrip\": true, "
                        "\"single_word\": false},"
                        "{\"id\": 302, \"content\": \"lo\", \"special\": false, "
                        "\"normalized\": true, \"lstrip\": false, \"rstrip\": false, "
                        "\"single_word\": true}";
    char *j = bytelevel_json(false, extra);
    oct_tokenizer *t = load_str(j, NULL);
    free(j);
    REQUIRE(t);
    /* lstrip/rstrip swallow the spaces around <mask> */
    CHECK_ENC(t, "a <mask>  b", true, 'a', 301, 'b');
    /* single_word: "lo" matches alone, not inside "hello" */
    CHECK_ENC(t, "hello lo", true, 257, 260, 32, 302);
    CHECK_EQ_INT(oct_tokenizer_token_to_id(t, "lo"), 302);
    oct_tokenizer_free(t);
}

static void test_stream_decode(void)
{
    char *j = bytelevel_json(false, NULL);
    oct_tokenizer *t = load_str(j, NULL);
    free(j);
    REQUIRE(t);
    oct_detokenizer *d = NULL;
    oct_error e;
    REQUIRE(oct_detokenizer_new(t, true, &d, &e) == OCT_OK);
    /* "hé€!" byte by byte: h, C3 A9, E2 82 AC, ! and a special token */
    const int32_t ids[] = {'h', 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 300, '!'};
    const char *want[] = {"h", "", "\xC3\xA9", "", "", "\xE2\x82\xAC", "", "!"};
    char all[64] = {0};
    for (size_t i = 0; i < OCT_ARRAY_LEN(ids); i++) {
        const char *s;
        size_t n;
        CHECK_OK(oct_detokenizer_push(d, ids[i], &s, &n, &e));
        CHECKF(n == strlen(want[i]) && memcmp(s, want[i], n) == 0, "step %zu: got '%.*s'", i,
               (int)n, s);
        strncat(all, s, n);
    }
    CHECK(strcmp(all, "h\xC3\xA9\xE2\x82\xAC!") == 0);
    /* an incomplete character at the end comes out at flush as U+FFFD */
    const char *s;
    size_t n;
    CHECK_OK(oct_detokenizer_push(d, 0xE2, &s, &n, &e));
    CHECK_EQ_INT(n, 0);
    CHECK_OK(oct_detokenizer_flush(d, &s, &n, &e));
    CHECK(n == 3 && memcmp(s, "\xEF\xBF\xBD", 3) == 0);
    oct_detokenizer_free(d);
    oct_tokenizer_free(t);
}

/* Llama-2 style: Prepend/Replace normalizer, no pre-tokenizer, byte
 * fallback, <s> template, Replace/ByteFallback/Fuse/Strip decoder. */
static char *sp_json(bool metaspace)
{
    json_t *vocab = json_object();
    json_object_set_new(vocab, "<unk>", json_integer(0));
    json_object_set_new(vocab, "<s>", json_integer(1));
    json_object_set_new(vocab, "</s>", json_integer(2));
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        json_object_set_new(vocab, s, json_integer(3 + b));
    }
    const char *toks[] = {"\xE2\x96\x81", "h", "i", "\xE2\x96\x81h", "\xE2\x96\x81hi"};
    for (int i = 0; i < 5; i++)
        json_object_set_new(vocab, toks[i], json_integer(259 + i));
    json_t *model = json_pack("{s:s, s:o, s:[s, s], s:s, s:b, s:b, s:b}", "type", "BPE", "vocab",
                              vocab, "merges", "\xE2\x96\x81 h", "\xE2\x96\x81h i", "unk_token",
                              "<unk>", "fuse_unk", 1, "byte_fallback", 1, "ignore_merges", 0);
    json_error_t je;
    json_t *added =
        json_loads("[{\"id\":0,\"content\":\"<unk>\",\"single_word\":false,\"lstrip\":false,"
                   "\"rstrip\":false,\"normalized\":false,\"special\":true},"
                   "{\"id\":1,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,"
                   "\"rstrip\":false,\"normalized\":false,\"special\":true},"
                   "{\"id\":2,\"content\":\"</s>\",\"single_word\":false,\"lstrip\":false,"
                   "\"rstrip\":false,\"normalized\":false,\"special\":true}]",
                   0, &je);
    json_t *norm, *pre;
    if (metaspace) {
        norm = json_null();
        pre = json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement", "\xE2\x96\x81",
                        "prepend_scheme", "first", "split", 0);
    } else {
        norm = json_loads("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\","
                          "\"prepend\":\"\\u2581\"},{\"type\":\"Replace\",\"pattern\":"
                          "{\"String\":\" \"},\"content\":\"\\u2581\"}]}",
                          0, &je);
        pre = json_null();
    }
    json_t *post = json_loads(
        "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\","
        "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],"
        "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}}",
        0, &je);
    json_t *dec = json_loads(
        "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":"
        "\"\\u2581\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},"
        "{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]}",
        0, &je);
    json_t *root =
        json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "added_tokens", added, "normalizer", norm,
                  "pre_tokenizer", pre, "post_processor", post, "decoder", dec, "model", model);
    char *s = json_dumps(root, 0);
    json_decref(root);
    return s;
}

static const char k_sp_config[] = "{\"bos_token\": \"<s>\", \"eos_token\": {\"content\": "
                                  "\"</s>\", \"__type\": \"AddedToken\"}, \"add_bos_token\": "
                                  "true, \"chat_template\": \"{{ bos_token }}x\"}";

static void test_sentencepiece_style(void)
{
    char *j = sp_json(false);
    oct_tokenizer *t = load_str(j, k_sp_config);
    free(j);
    REQUIRE(t);
    CHECK_ENC(t, "hi hi", true, 1, 263, 263);
    CHECK_ENC(t, "hi hi", false, 263, 263);
    /* é is not in the vocab: its bytes C3 A9 as <0xC3> <0xA9> */
    CHECK_ENC(t, "h\xC3\xA9", true, 1, 262, 3 + 0xC3, 3 + 0xA9);
    /* the piece after an added token gets its own ▁ (legacy Llama-2) */
    CHECK_ENC(t, "<s>hi", false, 1, 263);
    const int32_t ids[] = {1, 262, 3 + 0xC3, 3 + 0xA9, 263};
    check_decode(t, ids, 5, false, "<s> h\xC3\xA9 hi");
    check_decode(t, ids, 5, true, "h\xC3\xA9 hi");
    /* an invalid byte sequence: each byte becomes U+FFFD */
    const int32_t bad[] = {262, 3 + 0xC3, 261};
    check_decode(t, bad, 3, false, "h\xEF\xBF\xBDi");
    CHECK_EQ_INT(oct_tokenizer_bos_id(t), 1);
    CHECK_EQ_INT(oct_tokenizer_eos_id(t), 2);
    CHECK(strcmp(oct_tokenizer_eos_token(t), "</s>") == 0);
    CHECK(oct_tokenizer_chat_template(t) != NULL);
    oct_tokenizer_free(t);
}

static char g_warned[1024];

static void keep_warning(oct_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == OCT_LOG_WARN)
        snprintf(g_warned, sizeof g_warned, "%s", msg);
}

/* An eos_token the vocabulary lacks loads, with a warning naming it. */
static void test_eos_not_in_vocab(void)
{
    char *j = sp_json(false);
    g_warned[0] = 0;
    oct_log_set(keep_warning, NULL, OCT_LOG_WARN);
    oct_tokenizer *t = load_str(j, "{\"eos_token\": \"<|no_such_token|>\"}");
    oct_log_set(NULL, NULL, OCT_LOG_ERROR);
    free(j);
    REQUIRE(t);
    CHECK_EQ_INT(oct_tokenizer_eos_id(t), -1);
    CHECKF(strstr(g_warned, "eos_token '<|no_such_token|>' is not in the vocabulary") != NULL,
           "warning: '%s'", g_warned);
    oct_tokenizer_free(t);
}

static void test_metaspace_first(void)
{
    char *j = sp_json(true);
    oct_tokenizer *t = load_str(j, NULL);
    free(j);
    REQUIRE(t);
    CHECK_ENC(t, "hi hi", false, 263, 263);
    /* prepend_scheme "first": no ▁ for a piece that does not start the text */
    CHECK_ENC(t, "<s>hi", false, 1, 260, 261);
    /* unknown char without byte tokens -> bytes (byte_fallback) */
    CHECK_ENC(t, "\xC3\xA9", false, 259, 3 + 0xC3, 3 + 0xA9);
    oct_tokenizer_free(t);
}

/* --------------------------------------------------- internal: splitting */

static void pieces_of(const char *pre_json, const char *text, const char *const *want,
                      size_t n_want)
{
    json_error_t je;
    json_t *j = json_loads(pre_json, 0, &je);
    REQUIRE(j);
    tok_pre *p = NULL;
    oct_error e;
    oct_status st = tok_pre_parse(j, &p, "pre_tokenizer", &e);
    json_decref(j);
    CHECKF(st == OCT_OK, "%s", e.message);
    if (st)
        return;
    tok_work w = {0};
    w.md = pcre2_match_data_create(4, NULL);
    tok_buf_append(&w.text, text, strlen(text));
    tok_segs_push(&w.segs, 0, strlen(text), -1, true);
    CHECK_OK(tok_pre_apply(p, &w, &e));
    bool ok = w.segs.n == n_want;
    for (size_t i = 0; ok && i < n_want; i++)
        ok = w.segs.v[i].len == strlen(want[i]) &&
             memcmp(w.text.data + w.segs.v[i].off, want[i], w.segs.v[i].len) == 0;
    CHECKF(ok, "pieces of '%s' under %s", text, pre_json);
    if (!ok)
        for (size_t i = 0; i < w.segs.n; i++)
            fprintf(stderr, "  [%.*s]\n", (int)w.segs.v[i].len, w.text.data + w.segs.v[i].off);
    tok_work_free(&w);
    tok_pre_free(p);
}

#define PIECES(pre, text, ...)                                                                     \
    do {                                                                                           \
        const char *const w_[] = {__VA_ARGS__};                                                    \
        pieces_of(pre, text, w_, OCT_ARRAY_LEN(w_));                                               \
    } while (0)

static const char k_llama3_split[] =
    "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n"
    "\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*"
    "[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false}";

static void test_split_behaviors(void)
{
#define SPLIT_SPACE(b)                                                                             \
    "{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"" b "\",\"invert\":false}"
    PIECES(SPLIT_SPACE("Removed"), "a b  c", "a", "b", "c");
    PIECES(SPLIT_SPACE("Isolated"), "a b  c", "a", " ", "b", " ", " ", "c");
    PIECES(SPLIT_SPACE("MergedWithPrevious"), "a b  c", "a ", "b ", " ", "c");
    PIECES(SPLIT_SPACE("MergedWithNext"), "a b  c", "a", " b", " ", " c");
    PIECES(SPLIT_SPACE("Contiguous"), "a b  c", "a", " ", "b", "  ", "c");
    PIECES("{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Removed\","
           "\"invert\":true}",
           "a b  c", " ", " ", " ");
    PIECES("{\"type\":\"Digits\",\"individual_digits\":true}", "a12b3", "a", "1", "2", "b", "3");
    PIECES("{\"type\":\"Digits\",\"individual_digits\":false}", "a12b3", "a", "12", "b", "3");
    PIECES("{\"type\":\"Whitespace\"}", "hi, you!  ok", "hi", ",", "you", "!", "ok");
    PIECES("{\"type\":\"WhitespaceSplit\"}", " hi,\tyou ", "hi,", "you");
    PIECES("{\"type\":\"Punctuation\"}", "a,b!?", "a", ",", "b", "!", "?");
    /* Metaspace split=true: ▁ merged with the next piece */
    PIECES("{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"always\","
           "\"split\":true}",
           "hi  yo", "\xE2\x96\x81hi", "\xE2\x96\x81", "\xE2\x96\x81yo");
}

static void test_llama3_regex(void)
{
    PIECES(k_llama3_split, "I'm 12345 h\xC3\xA9llo!!\n\n  x", "I", "'m", " ", "123", "45",
           " h\xC3\xA9llo", "!!\n\n", " ", " x");
    /* case-insensitive contractions, CJK letters, emoji as "other" */
    PIECES(k_llama3_split, "WE'LL \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80!", "WE", "'LL",
           " \xE4\xBD\xA0\xE5\xA5\xBD", " \xF0\x9F\x98\x80!");
    /* Sequence with ByteLevel(use_regex=false) maps bytes only */
    char seq[1024];
    snprintf(seq, sizeof seq,
             "{\"type\":\"Sequence\",\"pretokenizers\":[%s,{\"type\":\"ByteLevel\","
             "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]}",
             k_llama3_split);
    PIECES(seq, "a b\n", "a",
           "\xC4\xA0"
           "b",
           "\xC4\x8A");
}

/* ---------------------------------------------------- internal: unicode */

static void check_nf(tok_nf_form f, const char *in, const char *want)
{
    tok_buf out = {0};
    CHECK(tok_unicode_normalize(f, in, strlen(in), &out));
    CHECKF(out.data && strcmp(out.data, want) == 0, "normalize(%d, '%s') = '%s'", (int)f, in,
           out.data ? out.data : "");
    tok_buf_free(&out);
}

static void test_unicode_normalization(void)
{
    check_nf(TOK_NF_C, "e\xCC\x81", "\xC3\xA9"); /* e + acute -> é */
    check_nf(TOK_NF_D, "\xC3\xA9", "e\xCC\x81");
    check_nf(TOK_NF_C, "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"); /* Hangul LVT */
    check_nf(TOK_NF_D, "\xEA\xB0\x81", "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8");
    check_nf(TOK_NF_C, "a\xCC\x82\xCC\xA3", "\xE1\xBA\xAD"); /* reordered marks compose */
    check_nf(TOK_NF_C, "\xC3\x85\xCC\x81", "\xC7\xBA");
    check_nf(TOK_NF_C, "\xEF\xAC\x81", "\xEF\xAC\x81");     /* ﬁ kept by NFC */
    check_nf(TOK_NF_KC, "\xEF\xAC\x81\xE2\x91\xA0", "fi1"); /* ﬁ① -> fi1 */
    check_nf(TOK_NF_C, "x\xCC\x81\xCC\x80", "x\xCC\x81\xCC\x80");
    check_nf(TOK_NF_C, "plain ascii", "plain ascii");
    tok_buf out = {0};
    CHECK(tok_unicode_lowercase("\xC4\xB0\xCE\xA3"
                                "A",
                                5, &out));
    CHECK(out.data && strcmp(out.data, "i\xCC\x87\xCF\x83"
                                       "a") == 0);
    tok_buf_free(&out);
}

static void test_utf8_lossy(void)
{
    struct {
        const char *in;
        size_t n;
        const char *want;
    } cases[] = {
        {"ab", 2, "ab"},
        {"\xE2\x82", 2, "\xEF\xBF\xBD"}, /* truncated: one U+FFFD */
        {"\xF0\x9F\x98"
         "a",
         4,
         "\xEF\xBF\xBD"
         "a"},
        {"\xC0\x80", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},                 /* never valid lead */
        {"\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* surrogate */
        {"\xE2\x82\xAC", 3, "\xE2\x82\xAC"},
    };
    for (size_t i = 0; i < OCT_ARRAY_LEN(cases); i++) {
        tok_buf b = {0};
        tok_buf_append(&b, "", 0);
        CHECK(tok_utf8_lossy(&b, (const unsigned char *)cases[i].in, cases[i].n));
        CHECKF(strcmp(b.data, cases[i].want) == 0, "case %zu", i);
        tok_buf_free(&b);
    }
}

/* ------------------------------------------------------------ load errors */

static void expect_load_error(const char *json, oct_status want, const char *needle)
{
    oct_tokenizer *t = NULL;
    oct_error e;
    oct_error_clear(&e);
    oct_status st = oct_tokenizer_load_json(json, strlen(json), NULL, 0, &t, &e);
    CHECKF(st == want, "status %d (want %d) for %.80s: %s", (int)st, (int)want, json, e.message);
    CHECKF(strstr(e.message, needle) != NULL, "message '%s' lacks '%s'", e.message, needle);
    CHECK(t == NULL);
    oct_tokenizer_free(t);
}

static void test_load_errors(void)
{
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []",
                      OCT_ERR_FORMAT, "line 1");
    expect_load_error("[1, 2]", OCT_ERR_FORMAT, "expected an object");
    /* a wrong type names the file and the line */
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},\n"
                      "\"pre_tokenizer\": {\"type\": \"ByteLevel\",\n"
                      "  \"add_prefix_space\": \"no\"}}",
                      OCT_ERR_FORMAT,
                      "tokenizer.json: line 3: pre_tokenizer.add_prefix_space: expected a boolean");
    expect_load_error("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", OCT_ERR_UNSUPPORTED,
                      "WordPiece");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": "
                      "[\"a b\"]}}",
                      OCT_ERR_FORMAT, "model.merges[0]");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}}}", OCT_ERR_FORMAT,
                      "model.vocab");
    expect_load_error("{\"normalizer\": {\"type\": \"BertNormalizer\"}, \"model\": {\"type\": "
                      "\"BPE\", \"vocab\": {}}}",
                      OCT_ERR_UNSUPPORTED, "BertNormalizer");
    expect_load_error("{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\":"
                      " \"UnicodeScripts\"}]}, \"model\": {\"type\": \"BPE\", \"vocab\": {}}}",
                      OCT_ERR_UNSUPPORTED, "pre_tokenizer.pretokenizers[0]");
    expect_load_error("{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"frobnicate\": 1}, "
                      "\"model\": {\"type\": \"BPE\", \"vocab\": {}}}",
                      OCT_ERR_UNSUPPORTED, "frobnicate");
    expect_load_error("{\"decoder\": {\"type\": \"WordPiece\"}, \"model\": {\"type\": \"BPE\", "
                      "\"vocab\": {}}}",
                      OCT_ERR_UNSUPPORTED, "decoder");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"dropout\": 0.1, \"vocab\": {}}}",
                      OCT_ERR_UNSUPPORTED, "dropout");
    expect_load_error("{\"truncation\": {\"max_length\": 5}, \"model\": {\"type\": \"BPE\", "
                      "\"vocab\": {}}}",
                      OCT_ERR_UNSUPPORTED, "truncation");
    expect_load_error("{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": "
                      "\"(\"}, \"behavior\": \"Isolated\"}, \"model\": {\"type\": \"BPE\", "
                      "\"vocab\": {}}}",
                      OCT_ERR_UNSUPPORTED, "pre_tokenizer.pattern");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999999}}}",
                      OCT_ERR_LIMIT, "too large");
    /* directory without tokenizer.json */
    oct_tokenizer *t = NULL;
    oct_error e;
    CHECK(oct_tokenizer_load("/nonexistent-dir", &t, &e) == OCT_ERR_IO);
    CHECK(strstr(e.message, "/nonexistent-dir/tokenizer.json") != NULL);
}

/* Fault injection: fail the k-th allocation of a load + encode until it
 * succeeds; every failure must be a clean error (ASan checks for leaks). */
static int64_t g_fail_at, g_alloc_count;
static void *fi_malloc(size_t n, void *u)
{
    (void)u;
    if (++g_alloc_count == g_fail_at)
        return NULL;
    return malloc(n);
}
static void *fi_realloc(void *p, size_t n, void *u)
{
    (void)u;
    if (++g_alloc_count == g_fail_at)
        return NULL;
    return realloc(p, n);
}
static void fi_free(void *p, void *u)
{
    (void)u;
    free(p);
}

static void test_fault_injection(void)
{
    char *j = sp_json(false);
    oct_allocator a = {fi_malloc, fi_realloc, fi_free, NULL};
    bool done = false;
    for (g_fail_at = 1; g_fail_at < 100000 && !done; g_fail_at++) {
        g_alloc_count = 0;
        oct_set_allocator(&a);
        oct_tokenizer *t = NULL;
        oct_error e;
        oct_status st =
            oct_tokenizer_load_json(j, strlen(j), k_sp_config, strlen(k_sp_config), &t, &e);
        if (st == OCT_OK) {
            oct_token_ids ids = {0};
            st = oct_tokenizer_encode(t, "hi h\xC3\xA9", 6, true, &ids, &e);
            char *s = NULL;
            if (st == OCT_OK)
                st = oct_tokenizer_decode(t, ids.ids, ids.n, false, &s, NULL, &e);
            oct_tokenizer_text_free(s);
            oct_token_ids_free(&ids);
            oct_tokenizer_free(t);
            done = st == OCT_OK && g_alloc_count < g_fail_at;
        } else {
            CHECK(t == NULL);
        }
        oct_set_allocator(NULL);
    }
    CHECK(done);
    free(j);
}

int main(void)
{
    RUN(test_bytelevel_bpe);
    RUN(test_empty_text_gives_no_ids);
    RUN(test_ignore_merges);
    RUN(test_added_token_strip);
    RUN(test_stream_decode);
    RUN(test_sentencepiece_style);
    RUN(test_metaspace_first);
    RUN(test_split_behaviors);
    RUN(test_llama3_regex);
    RUN(test_unicode_normalization);
    RUN(test_utf8_lossy);
    RUN(test_load_errors);
    RUN(test_eos_not_in_vocab);
    RUN(test_fault_injection);
    return testlib_finish();
}
