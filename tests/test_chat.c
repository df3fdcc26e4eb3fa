/* test_chat.c — the Jinja subset and oct_chat_render: hand-checked
 * templates (whitespace control, loops, namespace, filters, errors with
 * line numbers), and the renderings of real model templates made by
 * transformers' apply_chat_template (tests/fixtures/tokenizer_chat.jsonl.gz,
 * from tools/make_tokenizer_fixtures.py; missing fixture = failure). */
#include <jansson.h>

#include "octet.h"
#include "testlib.h"

static char *render(const char *tpl, const char *messages, const char *extra, bool agp,
                    oct_status *st_out, oct_error *e)
{
    char *out = NULL;
    oct_status st = oct_chat_render_json(NULL, tpl, messages, extra, agp, &out, NULL, e);
    if (st_out)
        *st_out = st;
    return out;
}

static void check_render(const char *tpl, const char *messages, const char *extra, bool agp,
                         const char *want)
{
    oct_error e;
    oct_status st;
    char *got = render(tpl, messages, extra, agp, &st, &e);
    CHECKF(st == OCT_OK, "render failed: %s\n  template: %s", e.message, tpl);
    if (st == OCT_OK)
        CHECKF(strcmp(got, want) == 0, "\n  template: %s\n  got:  [%s]\n  want: [%s]", tpl, got,
               want);
    oct_tokenizer_text_free(got);
}

static void check_error(const char *tpl, const char *needle)
{
    oct_error e;
    oct_status st;
    char *got = render(tpl, "[]", NULL, false, &st, &e);
    CHECKF(st != OCT_OK, "expected an error for %s, got [%s]", tpl, got ? got : "");
    if (st != OCT_OK)
        CHECKF(strstr(e.message, needle) != NULL, "message '%s' lacks '%s'", e.message, needle);
    oct_tokenizer_text_free(got);
}

static const char k_msgs[] = "[{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", "
                             "\"content\": \" hi \"}, {\"role\": \"assistant\", \"content\": "
                             "\"yo\"}]";

static void test_expressions(void)
{
    check_render(
        "{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 2 ** 10 }}", "[]",
        NULL, false, "7|3|-4|1|2|1024");
    check_render("{{ 1 / 2 }}|{{ 3.0 }}|{{ 1e20 }}|{{ 0.1 + 0.2 }}", "[]", NULL, false,
                 "0.5|3.0|1e+20|0.30000000000000004");
    check_render("{{ 'a' ~ 1 ~ none ~ true }}|{{ 'x' * 3 }}|{{ 'ab' + 'cd' }}", "[]", NULL, false,
                 "a1NoneTrue|xxx|abcd");
    check_render("{{ [1, 'a', none, true] }}|{{ {'k': 'v'} }}|{{ \"it's\" }}", "[]", NULL, false,
                 "[1, 'a', None, True]|{'k': 'v'}|it's");
    check_render("{{ 'b' in 'abc' }}{{ 2 in [1, 2] }}{{ 'k' in {'k': 1} }}{{ 3 not in [1] }}", "[]",
                 NULL, false, "TrueTrueTrueTrue");
    check_render("{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ not none }}|{{ 'a' if false else 'b' }}|"
                 "{{ 'a' if false }}|",
                 "[]", NULL, false, "x|y|True|b||");
    check_render("{{ messages[0].role }}|{{ messages[-1]['content'] }}|{{ messages[1:]|length }}"
                 "|{{ (messages[::-1]|first).role }}|{{ 'hello'[1:3] }}|{{ 'h\xC3\xA9llo'[::-1] }}",
                 k_msgs, NULL, false, "system|yo|2|assistant|el|oll\xC3\xA9h");
    check_render("{{ undefined_var }}|{{ undefined_var is defined }}|{{ x|default('d') }}|"
                 "{{ ''|default('e', true) }}",
                 "[]", NULL, false, "|False|d|e");
}

static void test_filters_and_methods(void)
{
    check_render("{{ '  a b  '|trim }}|{{ 'ABc'|lower }}|{{ 'abc'|upper }}|{{ [3,4]|length }}|"
                 "{{ 'h\xC3\xA9'|length }}|{{ ['a','b']|join(', ') }}|{{ 'hello world'|title }}|"
                 "{{ 'hello'|capitalize }}|{{ 'a-b'|replace('-', '+') }}",
                 "[]", NULL, false, "a b|abc|ABC|2|2|a, b|Hello World|Hello|a+b");
    check_render("{{ {'a': [1, 2.5, 'x\"y'], 'b': none}|tojson }}", "[]", NULL, false,
                 "{\"a\": [1, 2.5, \"x\\\"y\"], \"b\": null}");
    check_render("{{ {'a': [1, {}], 'b': 'é'}|tojson(indent=2) }}", "[]", NULL, false,
                 "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": \"é\"\n}");
    check_render("{{ '\\n x \\n'.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a b  c'.split() }}|"
                 "{{ 'a,b,,c'.split(',') }}|{{ 'a</think>b'.split('</think>')[-1] }}|"
                 "{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|"
                 "{{ '\\n\\nx'.lstrip('\\n') }}|{{ 'x\\n'.rstrip() }}",
                 "[]", NULL, false, "x|a|['a', 'b', 'c']|['a', 'b', '', 'c']|b|TrueTrue|x|x");
    check_render("{% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}={{ v }};{% endfor %}|"
                 "{% for k, v in {'c': 3}.items() %}{{ k }}{{ v }}{% endfor %}|"
                 "{{ {'a': 1}.get('a') }}{{ {'a': 1}.get('z', 0) }}|{{ {'a': 1}.keys()|list }}",
                 "[]", NULL, false, "a=1;b=2;|c3|10|['a']");
    check_render("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|"
                 "join }}|{{ ['a', 'b', 'a']|reject('equalto', 'a')|list }}|{{ [1,2,2]|unique|"
                 "list }}|{{ [1,2]|reverse|list }}",
                 k_msgs, NULL, false, " hi |['b']|[1, 2]|[2, 1]");
    check_render("{{ 'x' is string }}{{ 1 is number }}{{ none is none }}{{ {} is mapping }}"
                 "{{ [] is iterable }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}{{ false is false }}"
                 "{{ 1 is not string }}",
                 "[]", NULL, false, "TrueTrueTrueTrueTrueTrueTrueTrueTrue");
}

static void test_statements(void)
{
    /* loop variables, loop scoping and namespace */
    check_render("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}"
                 "{{ loop.last }}{{ loop.length }}{{ loop.revindex }};{% endfor %}",
                 k_msgs, NULL, false, "10TrueFalse33;21FalseFalse32;32FalseTrue31;");
    check_render("{% set x = 1 %}{% for m in messages %}{% set x = 2 %}{% endfor %}{{ x }}|"
                 "{% set ns = namespace(x=1) %}{% for m in messages %}{% set ns.x = ns.x + 1 %}"
                 "{% endfor %}{{ ns.x }}",
                 k_msgs, NULL, false, "1|4");
    check_render("{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role }}"
                 "{% endfor %}|{% for x in [] %}a{% else %}empty{% endfor %}|"
                 "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}"
                 "{% break %}{% endif %}{{ i }}{% endfor %}",
                 k_msgs, NULL, false, "1user2assistant|empty|02");
    check_render("{% if false %}a{% elif 0 %}b{% elif 'x' %}c{% else %}d{% endif %}", "[]", NULL,
                 false, "c");
    check_render("{% set b %}in {{ 1 + 1 }}{% endset %}[{{ b }}]", "[]", NULL, false, "[in 2]");
    /* whitespace: trim_blocks, lstrip_blocks, '-' and '+' modifiers, comments */
    check_render("{% if true %}\n  x\n{% endif %}\n", "[]", NULL, false, "  x\n");
    check_render("  {% if true %}\ny{% endif %}", "[]", NULL, false, "y");
    check_render("a  {%- if true -%}  b  {%- endif %}", "[]", NULL, false, "ab");
    check_render("a {{- ' b ' -}} c", "[]", NULL, false, "a b c");
    check_render("  {%+ if true %}x{% endif %}", "[]", NULL, false, "  x");
    check_render("a\n  {# comment #}\nb", "[]", NULL, false, "a\nb");
    check_render("{{ bos_token }}{{ add_generation_prompt }}", "[]", "{\"bos_token\": \"<s>\"}",
                 true, "<s>True");
}

static void test_errors(void)
{
    check_error("line1\n{{ raise_exception('bad roles') }}", "line 2: raise_exception: bad roles");
    check_error("{% macro m() %}{% endmacro %}", "unsupported tag 'macro'");
    check_error("\n\n{{ x | frobnicate }}", "line 3: unsupported filter 'frobnicate'");
    check_error("{% if true %}", "endif");
    check_error("{{ 'a' + 1 }}", "unsupported operand");
    check_error("{{ x.y.z }}", "undefined");
    check_error("{{ (1 }}", "expected ')'");
    check_error("{% for a, b, c in x %}{% endfor %}", "more than two");
    check_error("{{ 'abc", "unterminated string");
    check_error("{% set ns.x = 1 %}", "non-namespace");
    /* deeply nested input is refused, not a stack overflow */
    char deep[4100];
    memset(deep, '(', 4000);
    deep[4000] = 0;
    char tpl[4200];
    snprintf(tpl, sizeof tpl, "{{ %s1 }}", deep);
    check_error(tpl, "expression nested deeper than 256");
}

static void test_render_with_tokenizer(void)
{
    /* a tokenizer without chat_template uses the plain fallback */
    const char *tj = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}";
    const char *cfg = "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";
    oct_tokenizer *t = NULL;
    oct_error e;
    REQUIRE(oct_tokenizer_load_json(tj, strlen(tj), cfg, strlen(cfg), &t, &e) == OCT_OK);
    oct_chat_message msgs[] = {{"user", "hi"}, {"assistant", "yo"}};
    char *out = NULL;
    CHECK_OK(oct_chat_render(t, msgs, 2, true, &out, NULL, &e));
    CHECK(out && strcmp(out, "user: hi\n\nassistant: yo\n\nassistant: ") == 0);
    oct_tokenizer_text_free(out);
    oct_tokenizer_free(t);
    /* with a template from tokenizer_config.json: bos/eos come from it */
    cfg = "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"chat_template\": "
          "\"{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}"
          "{% endfor %}\"}";
    REQUIRE(oct_tokenizer_load_json(tj, strlen(tj), cfg, strlen(cfg), &t, &e) == OCT_OK);
    CHECK_OK(oct_chat_render(t, msgs, 2, false, &out, NULL, &e));
    CHECK(out && strcmp(out, "<s>[user]hi</s>[assistant]yo</s>") == 0);
    oct_tokenizer_text_free(out);
    oct_tokenizer_free(t);
}

static void test_transformers_renderings(void)
{
    const char *path = testlib_fixture("tokenizer_chat.jsonl");
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr,
                "FIXTURE MISSING: %s (from tests/fixtures/tokenizer_chat.jsonl.gz: run "
                "tools/make_tokenizer_fixtures.py, then make test)\n",
                path);
    }
    REQUIRE(f);
    json_error_t je;
    json_t *rec;
    int n = 0, fails = 0;
    while ((rec = json_loadf(f, JSON_DISABLE_EOF_CHECK, &je)) != NULL) {
        n++;
        char *msgs = json_dumps(json_object_get(rec, "messages"), 0);
        char *extra = json_dumps(json_object_get(rec, "extra"), 0);
        const char *tpl = json_string_value(json_object_get(rec, "template"));
        const char *name = json_string_value(json_object_get(rec, "name"));
        const char *conv = json_string_value(json_object_get(rec, "conversation"));
        bool agp = json_is_true(json_object_get(rec, "add_generation_prompt"));
        const json_t *want = json_object_get(rec, "rendered");
        oct_error e;
        oct_status st;
        char *got = render(tpl, msgs, extra, agp, &st, &e);
        bool ok;
        if (want)
            ok = st == OCT_OK && strcmp(got, json_string_value(want)) == 0;
        else
            ok = st != OCT_OK; /* transformers raised: we must fail too */
        if (!ok && fails++ < 8)
            fprintf(
                stderr, "  %s / %s / agp=%d:\n    want: %s\n    got:  %s\n", name, conv, (int)agp,
                want ? json_string_value(want) : json_string_value(json_object_get(rec, "error")),
                st == OCT_OK ? got : e.message);
        oct_tokenizer_text_free(got);
        free(msgs);
        free(extra);
        json_decref(rec);
    }
    fclose(f);
    CHECKF(fails == 0, "%d of %d renderings differ from transformers", fails, n);
    CHECKF(n >= 100, "only %d renderings in the fixture", n);
}

int main(void)
{
    RUN(test_expressions);
    RUN(test_filters_and_methods);
    RUN(test_statements);
    RUN(test_errors);
    RUN(test_render_with_tokenizer);
    RUN(test_transformers_renderings);
    return testlib_finish();
}
