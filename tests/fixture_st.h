/* fixture_st.h — a minimal safetensors reader for test fixtures (whole file in
 * memory, trusted input).  The library's own validating reader is src/io/;
 * tests of the lower layers (fp8, quant) must not depend on it. */
#ifndef OCTET_FIXTURE_ST_H
#define OCTET_FIXTURE_ST_H

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

typedef struct fixture_st {
    unsigned char *buf;
    size_t size;
    json_t *header;
    const unsigned char *data;
} fixture_st;

static inline int fixture_st_open(fixture_st *st, const char *name)
{
    memset(st, 0, sizeof *st);
    const char *path = testlib_fixture(name);
    st->buf = testlib_read_file(path, &st->size);
    if (!st->buf || st->size < 8) {
        fprintf(stderr, "fixture %s missing or empty (run make test to unpack .gz)\n", path);
        return -1;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | st->buf[i];
    json_error_t jerr;
    st->header = json_loadb((const char *)st->buf + 8, (size_t)hlen, 0, &jerr);
    if (!st->header) {
        fprintf(stderr, "fixture %s: bad header: %s\n", path, jerr.text);
        return -1;
    }
    st->data = st->buf + 8 + hlen;
    return 0;
}

static inline void fixture_st_close(fixture_st *st)
{
    json_decref(st->header);
    free(st->buf);
    memset(st, 0, sizeof *st);
}

/* Returns a pointer to the tensor's bytes (NULL if absent); fills shape (up to
 * 4 dims), ndim and byte size. */
static inline const void *fixture_st_get(const fixture_st *st, const char *name, int64_t *shape,
                                         int *ndim, size_t *nbytes)
{
    json_t *t = json_object_get(st->header, name);
    if (!t) {
        fprintf(stderr, "fixture tensor %s missing\n", name);
        return NULL;
    }
    json_t *sh = json_object_get(t, "shape");
    json_t *off = json_object_get(t, "data_offsets");
    size_t i;
    json_t *v;
    int n = 0;
    json_array_foreach(sh, i, v)
    {
        if (shape && n < 4)
            shape[n] = (int64_t)json_integer_value(v);
        n++;
    }
    if (ndim)
        *ndim = n;
    size_t a = (size_t)json_integer_value(json_array_get(off, 0));
    size_t b = (size_t)json_integer_value(json_array_get(off, 1));
    if (nbytes)
        *nbytes = b - a;
    return st->data + a;
}

/* __metadata__ string value or NULL. */
static inline const char *fixture_st_meta(const fixture_st *st, const char *key)
{
    json_t *m = json_object_get(st->header, "__metadata__");
    return m ? json_string_value(json_object_get(m, key)) : NULL;
}

#endif
