/* testlib.h — the in-repo test runner.
 *
 * A test file defines functions `static void test_xxx(void)` and a main() that
 * calls RUN(test_xxx) for each, then `return testlib_finish();`.  Checks record a
 * failure and keep going; the summary line "N passed, N failed" counts test
 * functions.  Tests run from the repository root; fixture paths go through
 * testlib_fixture() so that build/fixtures (decompressed by make) is found.
 */
#ifndef OCTET_TESTLIB_H
#define OCTET_TESTLIB_H

#define OCT_ARRAY_LEN_T(a) (sizeof(a) / sizeof((a)[0]))

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TESTLIB_UNUSED __attribute__((unused))
static int testlib_passed TESTLIB_UNUSED;
static int testlib_failed TESTLIB_UNUSED;
static int testlib_cur_failed TESTLIB_UNUSED;
static const char *testlib_cur_name TESTLIB_UNUSED;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d %s: %s\n", __FILE__, __LINE__, testlib_cur_name, #cond);   \
            testlib_cur_failed++;                                                                  \
        }                                                                                          \
    } while (0)

/* CHECKF(cond, fmt, ...) prints a formatted reason on failure. */
#define CHECKF(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d %s: %s: ", __FILE__, __LINE__, testlib_cur_name, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            testlib_cur_failed++;                                                                  \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    CHECKF((long long)(a) == (long long)(b), "%lld != %lld", (long long)(a), (long long)(b))

#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        int testlib_st_ = (int)(expr);                                                             \
        CHECKF(testlib_st_ == 0, "status %d", testlib_st_);                                        \
    } while (0)

/* Stop the current test function (after a failed precondition). */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d %s: required %s\n", __FILE__, __LINE__, testlib_cur_name,  \
                    #cond);                                                                        \
            testlib_cur_failed++;                                                                  \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define RUN(fn)                                                                                    \
    do {                                                                                           \
        testlib_cur_name = #fn;                                                                    \
        testlib_cur_failed = 0;                                                                    \
        fn();                                                                                      \
        if (testlib_cur_failed) {                                                                  \
            testlib_failed++;                                                                      \
            printf("not ok %s\n", #fn);                                                            \
        } else {                                                                                   \
            testlib_passed++;                                                                      \
            printf("ok %s\n", #fn);                                                                \
        }                                                                                          \
        fflush(stdout);                                                                            \
    } while (0)

static inline int testlib_finish(void)
{
    printf("%d passed, %d failed\n", testlib_passed, testlib_failed);
    return testlib_failed ? 1 : 0;
}

/* Path of a fixture: build/fixtures/NAME if make decompressed it there, else
 * tests/fixtures/NAME.  Returns a static buffer. */
static inline const char *testlib_fixture(const char *name)
{
    static char path[1024];
    const char *build = getenv("BUILD");
    snprintf(path, sizeof path, "%s/fixtures/%s", build ? build : "build", name);
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        return path;
    }
    snprintf(path, sizeof path, "tests/fixtures/%s", name);
    return path;
}

/* Reads a whole file; returns NULL on failure.  *size receives the length. */
static inline unsigned char *testlib_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    unsigned char *buf = malloc((size_t)len + 1);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[len] = 0;
        *size = (size_t)len;
    }
    return buf;
}

/* Removes a flat directory (its files, then itself): the temporary checkpoint
 * folders the tests write.  Best effort: a leftover only costs /tmp space. */
static inline void testlib_rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

#endif
