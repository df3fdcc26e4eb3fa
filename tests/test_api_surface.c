/* test_api_surface.c — liboctet.so exports the public API and nothing else.
 *
 * The library is built with -fvisibility=hidden and include/octet.h marks
 * every public function OCT_API (docs/API.md).  This test reads the header,
 * collects the functions it declares (`oct_name (` outside comments), runs
 * `nm -D --defined-only $BUILD/liboctet.so` and requires that every exported
 * symbol starts with oct_ and is declared in the header, and that every
 * declared function is exported (a missing OCT_API, or a declaration without
 * a definition).  Failures list the offenders. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#define MAX_NAMES 4096
#define NAME_LEN 128

typedef struct names {
    char v[MAX_NAMES][NAME_LEN];
    int n;
} names;

static names g_declared, g_exported;
static bool g_header_ok, g_nm_ok;

static bool names_has(const names *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], name))
            return true;
    return false;
}

static void names_add(names *s, const char *name, size_t len)
{
    if (len >= NAME_LEN || s->n == MAX_NAMES)
        return;
    char buf[NAME_LEN];
    memcpy(buf, name, len);
    buf[len] = 0;
    if (!names_has(s, buf))
        memcpy(s->v[s->n++], buf, len + 1);
}

static bool is_ident(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* Replaces every comment of a C source with spaces (keeps line structure). */
static void strip_comments(char *s)
{
    for (char *p = s; *p; p++) {
        if (p[0] == '/' && p[1] == '*') {
            char *e = strstr(p + 2, "*/");
            char *end = e ? e + 2 : p + strlen(p);
            for (; p < end; p++)
                if (*p != '\n')
                    *p = ' ';
            p--;
        } else if (p[0] == '/' && p[1] == '/') {
            for (; *p && *p != '\n'; p++)
                *p = ' ';
            p--;
        } else if (*p == '"') { /* a string literal is not code to scan */
            for (p++; *p && *p != '"' && *p != '\n'; p++)
                if (*p == '\\' && p[1])
                    p++;
        }
    }
}

/* Functions declared in one header: an identifier oct_* directly followed
 * (after blanks) by '(' outside comments. */
static void read_one_header(const char *path)
{
    size_t size = 0;
    char *text = (char *)testlib_read_file(path, &size);
    if (!text)
        return;
    strip_comments(text);
    for (char *p = text; (p = strstr(p, "oct_")) != NULL;) {
        if (p > text && is_ident(p[-1])) {
            p += 4;
            continue;
        }
        char *e = p;
        while (is_ident(*e))
            e++;
        char *q = e;
        while (*q == ' ' || *q == '\t' || *q == '\n')
            q++;
        if (*q == '(')
            names_add(&g_declared, p, (size_t)(e - p));
        p = e;
    }
    free(text);
}

/* The public headers: include/octet.h and the ones it includes, each by name
 * from include/octet/ (a header octet.h did not include would not be public). */
static void read_header(void)
{
    size_t size = 0;
    char *umb = (char *)testlib_read_file("include/octet.h", &size);
    if (!umb)
        return;
    read_one_header("include/octet.h");
    int n = 0;
    for (char *p = umb; (p = strstr(p, "#include \"octet/")) != NULL; n++) {
        p += strlen("#include \"");
        char *e = strchr(p, '"');
        char path[256];
        if (!e || e - p > 200)
            break;
        snprintf(path, sizeof path, "include/%.*s", (int)(e - p), p);
        read_one_header(path);
        p = e;
    }
    free(umb);
    g_header_ok = n >= 9 && g_declared.n > 0;
}

/* Symbols `nm -D --defined-only` lists for the shared library. */
static void read_exports(const char *so)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s' 2>&1", so);
    FILE *f = popen(cmd, "r");
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        /* "0000000000012340 T oct_status_str" (an undefined-address form
         * "  w name" does not occur with --defined-only) */
        char addr[64], type[8], name[512];
        if (sscanf(line, "%63s %7s %511s", addr, type, name) != 3) {
            fprintf(stderr, "nm: %s", line);
            continue;
        }
        char *at = strchr(name, '@'); /* symbol versions: name@@VER */
        size_t len = at ? (size_t)(at - name) : strlen(name);
        names_add(&g_exported, name, len);
    }
    g_nm_ok = pclose(f) == 0 && g_exported.n > 0;
}

static void test_header_parses(void)
{
    REQUIRE(g_header_ok);
    /* a few anchors from each section, so a broken parser cannot pass */
    CHECK(names_has(&g_declared, "oct_status_str"));
    CHECK(names_has(&g_declared, "oct_fp8_from_f32"));
    CHECK(names_has(&g_declared, "oct_checkpoint_open"));
    CHECK(names_has(&g_declared, "oct_tokenizer_encode"));
    CHECK(names_has(&g_declared, "oct_model_load"));
    CHECK(names_has(&g_declared, "oct_server_free"));
    /* typedef'd function pointers and comments are not declarations */
    CHECK(!names_has(&g_declared, "oct_log_fn"));
    CHECK(!names_has(&g_declared, "oct_status"));
}

static void test_exports_are_declared(void)
{
    REQUIRE(g_header_ok);
    REQUIRE(g_nm_ok);
    int bad = 0;
    for (int i = 0; i < g_exported.n; i++) {
        const char *s = g_exported.v[i];
        if (strncmp(s, "oct_", 4) != 0 || !names_has(&g_declared, s)) {
            fprintf(stderr, "exported but not public (not oct_* declared in octet.h): %s\n", s);
            bad++;
        }
    }
    CHECKF(bad == 0, "%d of %d exported symbols are not the public API", bad, g_exported.n);
}

static void test_declared_are_exported(void)
{
    REQUIRE(g_header_ok);
    REQUIRE(g_nm_ok);
    int bad = 0;
    for (int i = 0; i < g_declared.n; i++) {
        if (!names_has(&g_exported, g_declared.v[i])) {
            fprintf(stderr, "declared in octet.h but not exported (OCT_API?): %s\n",
                    g_declared.v[i]);
            bad++;
        }
    }
    CHECKF(bad == 0, "%d of %d public functions are missing from the .so", bad, g_declared.n);
}

/* Each public header compiles alone, as C11 and as C++ (-Wall -Werror). */
static void test_headers_compile_alone(void)
{
    static const char *hdrs[] = {
        "octet.h",    "octet/core.h",      "octet/fp8.h",   "octet/quant.h",  "octet/kernels.h",
        "octet/io.h", "octet/tokenizer.h", "octet/model.h", "octet/engine.h", "octet/server.h"};
    static const char *langs[][2] = {{"cc -std=c11", "c"}, {"c++ -std=c++17", "c++"}};
    for (size_t i = 0; i < OCT_ARRAY_LEN_T(hdrs); i++)
        for (int l = 0; l < 2; l++) {
            char cmd[512];
            snprintf(cmd, sizeof cmd,
                     "printf '#include \"%s\"\\n' | %s -Wall -Wextra -Werror -Iinclude "
                     "-fsyntax-only -x %s - 2>&1",
                     hdrs[i], langs[l][0], langs[l][1]);
            FILE *f = popen(cmd, "r");
            REQUIRE(f);
            char out[512] = "";
            size_t n = fread(out, 1, sizeof out - 1, f);
            out[n] = 0;
            CHECKF(pclose(f) == 0, "%s alone as %s: %s", hdrs[i], langs[l][1], out);
        }
}

int main(void)
{
    const char *build = getenv("BUILD");
    char so[400];
    snprintf(so, sizeof so, "%.300s/liboctet.so", build ? build : "build");
    read_header();
    read_exports(so);
    if (!g_nm_ok)
        fprintf(stderr, "cannot list the exports of %s with nm\n", so);
    RUN(test_header_parses);
    RUN(test_exports_are_declared);
    RUN(test_declared_are_exported);
    RUN(test_headers_compile_alone);
    return testlib_finish();
}
