/* test_template_limits.c — the chat-template engine's limits: nesting of
 * blocks and expressions (parser), evaluation depth, value nesting and the
 * step budget end in a clean error that names the limit; templates within
 * them render as Python's Jinja2 does (tests/fixtures/template_limits.json,
 * from tools/make_template_limit_fixtures.py); a loop that keeps nothing
 * gives its memory back each iteration; the deepest templates the limits
 * allow run on a small thread stack. */
#include <jansson.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "octet.h"
#include "testlib.h"

/* Under ASan, freed blocks wait in a quarantine (256 MB by default) that
 * test_loop_memory would measure as resident; keep it small. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "quarantine_size_mb=1";
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* open * n + mid + close * n; caller frees. */
static char *nest(const char *open, const char *mid, const char *close, size_t n)
{
    size_t lo = strlen(open), lm = strlen(mid), lc = strlen(close);
    char *s = malloc((lo + lc) * n + lm + 1), *p = s;
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i++, p += lo)
        memcpy(p, open, lo);
    memcpy(p, mid, lm);
    p += lm;
    for (size_t i = 0; i < n; i++, p += lc)
        memcpy(p, close, lc);
    *p = 0;
    return s;
}

static char *render(const char *tpl, oct_status *st, oct_error *e)
{
    char *out = NULL;
    *st = oct_chat_render_json(NULL, tpl, "[]", NULL, false, &out, NULL, e);
    return out;
}

/* Renders tpl (freed here), expects an error containing needle, and prints
 * how long it took under `what`. */
static void expect_error(char *tpl, const char *needle, const char *what)
{
    REQUIRE(tpl);
    oct_error e;
    oct_status st;
    double t0 = now_s();
    char *out = render(tpl, &st, &e);
    double dt = now_s() - t0;
    printf("  %-40s %7.3f s  %s\n", what, dt, st ? e.message : "(rendered)");
    CHECKF(st == OCT_ERR_FORMAT, "%s: status %d, want a template error", what, (int)st);
    if (st)
        CHECKF(strstr(e.message, needle) != NULL, "%s: message '%s' lacks '%s'", what, e.message,
               needle);
    CHECKF(dt < 30.0, "%s took %.1f s", what, dt);
    oct_tokenizer_text_free(out);
    free(tpl);
}

static void expect_text(char *tpl, const char *want, const char *what)
{
    REQUIRE(tpl);
    oct_error e;
    oct_status st;
    char *out = render(tpl, &st, &e);
    CHECKF(st == OCT_OK, "%s: %s", what, e.message);
    if (st == OCT_OK)
        CHECKF(strcmp(out, want) == 0, "%s: got [%.80s], want [%.80s]", what, out, want);
    oct_tokenizer_text_free(out);
    free(tpl);
}

static void test_jinja2_renderings(void)
{
    const char *path = testlib_fixture("template_limits.json");
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        fprintf(stderr, "FIXTURE MISSING: %s (run tools/make_template_limit_fixtures.py)\n", path);
    REQUIRE(root);
    json_t *cases = json_object_get(root, "cases");
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *tpl = json_string_value(json_object_get(c, "template"));
        const char *want = json_string_value(json_object_get(c, "text"));
        double t0 = now_s();
        expect_text(strdup(tpl), want, name);
        printf("  %-40s %7.3f s\n", name, now_s() - t0);
    }
    CHECKF(i >= 10, "only %zu cases in %s", i, path);
    json_decref(root);
}

static void test_block_nesting(void)
{
    expect_error(nest("{% if true %}", "x", "{% endif %}", 43000), "blocks nested deeper than 256",
                 "43000 nested ifs");
    expect_error(nest("{% for i in [1] %}", "x", "{% endfor %}", 34000),
                 "blocks nested deeper than 256", "34000 nested fors (1 MiB)");
    expect_error(nest("{% set x %}", "x", "{% endset %}", 43000), "blocks nested deeper than 256",
                 "43000 nested block sets");
    expect_error(nest("{% if false %}{% else %}", "x", "{% endif %}", 257),
                 "blocks nested deeper than 256", "257 nested else blocks");
    expect_text(nest("{% if true %}", "x", "{% endif %}", 256), "x", "256 nested ifs");
    expect_text(nest("{% for i in [1] %}", "{{ i }}", "{% endfor %}", 256), "1", "256 nested fors");
    expect_text(nest("{% generation %}", "g", "{% endgeneration %}", 256), "g",
                "256 nested generation blocks");
}

/* "{{ " + open * n + mid + close * n + " }}"; caller frees. */
static char *nest_expr(const char *open, const char *mid, const char *close, size_t n)
{
    char *inner = nest(open, mid, close, n);
    char *tpl = inner ? nest("{{ ", inner, " }}", 1) : NULL;
    free(inner);
    return tpl;
}

static void test_expression_nesting(void)
{
    static const struct {
        const char *open, *mid, *close, *what;
    } forms[] = {
        {"(", "1", ")", "parentheses"},
        {"[", "1", "]", "lists"},
        {"{'k': ", "1", "}", "dicts"},
        {"none|default(", "1", ")", "filter arguments"},
        {"range(", "1", ")", "call arguments"},
        {"[1][", "0", "]", "subscripts"},
        {"-", "1", "", "unary minus"},
        {"not ", "true", "", "not"},
        {"1 ** ", "1", "", "**"},
        {"1 if false else ", "2", "", "conditional else"},
    };
    for (size_t k = 0; k < OCT_ARRAY_LEN_T(forms); k++) {
        /* 100000 deep, or as deep as fits in the 1 MiB template limit */
        size_t unit = strlen(forms[k].open) + strlen(forms[k].close);
        size_t n =
            ((size_t)1 << 20) / (unit + 1) < 100000 ? ((size_t)1 << 20) / (unit + 1) : 100000;
        char what[96];
        snprintf(what, sizeof what, "%zu nested %s", n, forms[k].what);
        expect_error(nest_expr(forms[k].open, forms[k].mid, forms[k].close, n),
                     "expression nested deeper than 256", what);
    }
    expect_text(nest_expr("(", "1", ")", 255), "1", "255 nested parentheses");
    expect_error(nest_expr("(", "1", ")", 256), "expression nested deeper than 256",
                 "256 nested parentheses (257 levels with the outermost)");
}

static void test_eval_depth(void)
{
    /* a left-deep chain parses in a loop but evaluates recursively */
    expect_error(nest_expr("", "1", " + 1", 3000), "evaluation nested deeper than 1024",
                 "1 + 1 + ... (3001 terms)");
    expect_text(nest_expr("", "1", " + 1", 999), "1000", "1 + 1 + ... (1000 terms)");
    /* macros are not part of the subset: a recursive one is refused */
    expect_error(strdup("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
                 "unsupported tag 'macro'", "recursive macro");
}

static void test_value_nesting(void)
{
    static const char deep[] = "{% set ns = namespace(x=1) %}{% for i in range(3000) %}"
                               "{% set ns.x = [ns.x] %}{% endfor %}";
    char buf[512];
    snprintf(buf, sizeof buf, "%s{{ ns.x }}", deep);
    expect_error(strdup(buf), "value nested deeper than 1000", "str() of a 3000-deep list");
    snprintf(buf, sizeof buf, "%s{{ ns.x | tojson }}", deep);
    expect_error(strdup(buf), "value nested deeper than 1000", "tojson of a 3000-deep list");
    snprintf(buf, sizeof buf, "%s{{ ns.x ~ '' }}", deep);
    expect_error(strdup(buf), "value nested deeper than 1000", "~ of a 3000-deep list");
    expect_error(strdup("{% set a = namespace() %}{% set a.x = a %}{{ a | tojson }}"),
                 "value nested deeper than 1000", "tojson of a namespace holding itself");
    snprintf(buf, sizeof buf,
             "%s{%% set ns.y = 1 %%}{%% for i in range(3000) %%}{%% set ns.y = [ns.y] %%}"
             "{%% endfor %%}{{ ns.x == ns.y }}",
             deep);
    expect_text(strdup(buf), "False", "== of two 3000-deep lists (over the limit: unequal)");
}

static void test_step_budget(void)
{
    expect_error(strdup("{% for i in range(1000000) %}{% for j in range(1000000) %}"
                        "{% endfor %}{% endfor %}"),
                 "more than 50000000 steps", "10^12 loop iterations");
    expect_error(strdup("{% for i in range(1000000) %}{% for j in range(100) %}{{ '' }}"
                        "{% endfor %}{% endfor %}"),
                 "more than 50000000 steps", "10^8 outputs");
}

/* Resident set size now, KiB. */
static long rss_kib(void)
{
    long pages = -1, resident = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = -1;
        fclose(f);
    }
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Peak RSS growth (KiB) of rendering tpl, in a child process (its peak
 * counts the parent's from before the fork: this test runs first). */
static long render_peak_kib(const char *tpl, bool *ok)
{
    int fd[2];
    *ok = false;
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        long rss0 = rss_kib();
        oct_status st;
        oct_error e;
        char *out = render(tpl, &st, &e);
        struct rusage r;
        getrusage(RUSAGE_SELF, &r);
        long msg[2] = {st == OCT_OK && out && !out[0], rss0 < 0 ? -1 : r.ru_maxrss - rss0};
        ssize_t w = write(fd[1], msg, sizeof msg);
        _exit(w == (ssize_t)sizeof msg ? 0 : 1);
    }
    close(fd[1]);
    long msg[2] = {0, -1};
    ssize_t r = pid > 0 ? read(fd[0], msg, sizeof msg) : -1;
    close(fd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    *ok = r == (ssize_t)sizeof msg && msg[0];
    return msg[1];
}

static const char k_ns_loop[] = "{% set ns = namespace(n=0) %}{% for i in range(1000000) %}"
                                "{% set ns.n = ns.n + 1 %}{% set s = i ~ 'abcdefgh' %}{% endfor %}"
                                "{{ '' if ns.n != 1000000 }}";

static void test_loop_memory(void)
{
    /* peak bound, MiB: the 16 MB range() list (and for the filtered loop its
     * 16 MB result) plus slack; keeping each iteration's memory costs more
     * than 32 MB (the loop variable alone took over 500 MB) */
    static const struct {
        const char *tpl;
        long max_mib;
    } cases[] = {
        {"{% for i in range(1000000) %}{% endfor %}", 28},
        {"{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", 28},
        {"{% for i in range(1000000) %}{{ '' if (i ~ 'abcdefgh') == 'x' }}{% endfor %}", 28},
        {"{% for i in range(1000000) if (i ~ 'abcdefgh') != 'x' %}{% endfor %}", 44},
        {k_ns_loop, 28},
    };
    for (size_t k = 0; k < OCT_ARRAY_LEN_T(cases); k++) {
        bool ok;
        double t0 = now_s();
        long kib = render_peak_kib(cases[k].tpl, &ok);
        printf("  %7.3f s  peak RSS +%ld KiB  %s\n", now_s() - t0, kib, cases[k].tpl);
        CHECKF(ok, "%s did not render to empty text", cases[k].tpl);
        CHECKF(kib >= 0 && kib < cases[k].max_mib * 1024, "%s: peak RSS grew %ld KiB", cases[k].tpl,
               kib);
    }
}

/* The deepest templates the limits allow, on a small thread stack (the
 * server renders on its connection threads). */
static void *deep_renders(void *arg)
{
    static const char vchain[] = "{% set ns = namespace(x=1) %}{% for i in range(999) %}"
                                 "{% set ns.x = [ns.x] %}{% endfor %}";
    char *t[5];
    t[0] = nest("{% if true %}", "x", "{% endif %}", 256);
    t[1] = nest("{% for i in [1] %}{% if true %}", "{{ i }}", "{% endif %}{% endfor %}", 128);
    t[2] = nest_expr("[(", "1", ")]", 127);
    t[3] = nest_expr("", "1", " ~ 1", 1000);
    t[4] = nest(vchain, "", "{{ ns.x | tojson }}{{ ns.x }}", 1);
    int *fails = arg;
    for (int k = 0; k < 5; k++) {
        oct_status st;
        oct_error e;
        char *out = t[k] ? render(t[k], &st, &e) : NULL;
        *fails += !out;
        oct_tokenizer_text_free(out);
        free(t[k]);
    }
    return NULL;
}

static void test_small_stack(void)
{
    pthread_attr_t attr;
    pthread_t th;
    int fails = 0;
    REQUIRE(pthread_attr_init(&attr) == 0);
    REQUIRE(pthread_attr_setstacksize(&attr, (size_t)2 << 20) == 0);
    REQUIRE(pthread_create(&th, &attr, deep_renders, &fails) == 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&attr);
    CHECKF(fails == 0, "%d of the deepest templates failed to render", fails);
}

int main(void)
{
    RUN(test_loop_memory);
    RUN(test_jinja2_renderings);
    RUN(test_block_nesting);
    RUN(test_expression_nesting);
    RUN(test_eval_depth);
    RUN(test_value_nesting);
    RUN(test_step_budget);
    RUN(test_small_stack);
    return testlib_finish();
}
