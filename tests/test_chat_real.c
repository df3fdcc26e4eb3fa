/* test_chat_real.c — the chat templates of real published tokenizers,
 * rendered by octet and by Python's Jinja2 set up as transformers'
 * apply_chat_template sets it up (tools/jinja_reference.py, run with Debian's
 * /usr/bin/python3 and python3-jinja2; missing = failure, not a skip).
 *
 * tools/real_tokenizers.sh puts the unmodified tokenizer files of the models
 * in $BUILD/tests/real_tokenizers/models/.  Every case of
 * tests/fixtures/chat_cases.json is rendered with each model's template (or
 * the case's own template): octet's text must be byte-identical to Jinja2's;
 * where Jinja2 raises, octet must fail too, and for the template's own
 * raise_exception(...) its message must contain the template's message.
 * Models without a chat_template run only the cases that bring a template.
 * The `octet tokenize --chat` CLI is checked on one model as well. */
#include <jansson.h>

#include "octet.h"
#include "testlib.h"

static const char *const k_models[] = {"llama3", "llama3_1", "qwen3",          "deepseek_v3",
                                       "gemma3", "gpt-oss",  "mistral-7b-v0.1"};
static const char k_cases[] = "tests/fixtures/chat_cases.json";

static const char *g_build = "build";
static char g_root[512];
static bool g_tokenizers_ready;
static bool g_jinja_ready;

static void setup(void)
{
    if (getenv("BUILD"))
        g_build = getenv("BUILD");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "tools/real_tokenizers.sh %s", g_build);
    g_tokenizers_ready = system(cmd) == 0;
    snprintf(g_root, sizeof g_root, "%s/tests/real_tokenizers", g_build);
    g_jinja_ready = system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") == 0;
    if (!g_jinja_ready)
        fprintf(stderr, "test_chat_real: /usr/bin/python3 cannot import jinja2: install "
                        "python3-jinja2 (apt-get install python3-jinja2, or tools/deps.sh test)\n");
    snprintf(cmd, sizeof cmd, "mkdir -p %s/tests/chat_real", g_build);
    if (system(cmd) != 0)
        fprintf(stderr, "test_chat_real: cannot create %s/tests/chat_real\n", g_build);
}

/* Jinja2's results for one model's tokenizer_config.json, or NULL. */
static json_t *reference(const char *model)
{
    char out[1024], cmd[4096];
    snprintf(out, sizeof out, "%s/tests/chat_real/%s.json", g_build, model);
    snprintf(
        cmd, sizeof cmd,
        "/usr/bin/python3 tools/jinja_reference.py --config %s/models/%s/tokenizer_config.json "
        "%s %s",
        g_root, model, k_cases, out);
    if (system(cmd) != 0)
        return NULL;
    json_error_t je;
    json_t *r = json_load_file(out, 0, &je);
    if (!r)
        fprintf(stderr, "  %s: %s\n", out, je.text);
    return r;
}

static void show_diff(const char *got, const char *want)
{
    size_t i = 0;
    while (got[i] && got[i] == want[i])
        i++;
    size_t from = i > 60 ? i - 60 : 0;
    printf("    first difference at byte %zu\n    octet:  [%.160s]\n    jinja2: [%.160s]\n", i,
           got + from, want + from);
}

typedef struct tally {
    int n_cases, n_same, n_raise;
} tally;

static char *dump_or_null(const json_t *j)
{
    return j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* Renders one case with octet and compares it with Jinja2's result `want`. */
static bool check_case(const oct_tokenizer *tok, const char *model, const json_t *c,
                       const json_t *want, tally *t)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    const char *tpl = json_string_value(json_object_get(c, "template"));
    char *msgs = dump_or_null(json_object_get(c, "messages"));
    char *extra = dump_or_null(json_object_get(c, "extra"));
    bool agp = json_is_true(json_object_get(c, "add_generation_prompt"));
    char *got = NULL;
    oct_error e;
    oct_status st = oct_chat_render_json(tok, tpl, msgs, extra, agp, &got, NULL, &e);
    const char *want_text = json_string_value(json_object_get(want, "text"));
    const char *want_err = json_string_value(json_object_get(want, "error"));
    const char *kind = json_string_value(json_object_get(want, "kind"));
    bool ok;
    if (want_text) {
        ok = st == OCT_OK && strcmp(got, want_text) == 0;
        if (st != OCT_OK)
            printf("  %s/%s: octet failed: %s\n", model, name, e.message);
        else if (!ok)
            show_diff(got, want_text), printf("  %s/%s: differs (above)\n", model, name);
    } else {
        bool own = kind && strcmp(kind, "TemplateError") == 0;
        ok = st != OCT_OK && (!own || strstr(e.message, want_err ? want_err : "") != NULL);
        if (!ok)
            printf("  %s/%s: jinja2 raised %s: %s; octet %s: %s\n", model, name, kind, want_err,
                   st ? "failed" : "rendered", st ? e.message : got);
        t->n_raise += ok;
    }
    t->n_same += ok;
    t->n_cases++;
    oct_tokenizer_text_free(got);
    free(msgs);
    free(extra);
    return ok;
}

static void check_model(const char *model)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models/%s", g_root, model);
    oct_tokenizer *tok = NULL;
    oct_error e;
    REQUIRE(oct_tokenizer_load(dir, &tok, &e) == OCT_OK);
    json_error_t je;
    json_t *root = json_load_file(k_cases, 0, &je);
    const json_t *cases = json_object_get(root, "cases");
    CHECKF(cases, "%s: %s", k_cases, je.text);
    json_t *ref = reference(model);
    CHECKF(json_array_size(ref) == json_array_size(cases), "%s: no Jinja2 reference", model);
    bool has_template = oct_tokenizer_chat_template(tok) != NULL;
    tally t = {0};
    for (size_t i = 0; i < json_array_size(cases) && i < json_array_size(ref); i++) {
        const json_t *c = json_array_get(cases, i);
        if (has_template || json_object_get(c, "template"))
            CHECK(check_case(tok, model, c, json_array_get(ref, i), &t));
    }
    printf("%s: %d of %d cases byte-identical to Jinja2 (%d of them raise in both)%s\n", model,
           t.n_same, t.n_cases, t.n_raise,
           has_template ? "" : "; no chat_template: only cases with their own template");
    json_decref(ref);
    json_decref(root);
    oct_tokenizer_free(tok);
}

static void test_real_chat_templates(void)
{
    REQUIRE(g_tokenizers_ready);
    REQUIRE(g_jinja_ready);
    for (size_t i = 0; i < OCT_ARRAY_LEN_T(k_models); i++)
        check_model(k_models[i]);
}

int main(void)
{
    setup();
    RUN(test_real_chat_templates);
    return testlib_finish();
}
