/* safetensors_read.c — zero-copy reader of one safetensors file.
 *
 * Byte layout accepted (everything else is OCT_ERR_FORMAT):
 *   [0, 8)          N, unsigned 64-bit little endian, 2 <= N <= 100 MiB
 *   [8, 8 + N)      UTF-8 JSON object, first byte '{', trailing spaces allowed:
 *                     "__metadata__": {"key": "string", ...}          (optional)
 *                     "<name>": {"dtype": "F32", "shape": [d0, ...],
 *                                "data_offsets": [begin, end]}        (per tensor)
 *   [8 + N, EOF)    data section; [begin, end) is relative to its start.
 * Tensors sorted by begin must tile the data section exactly (no overlap, no
 * gap, nothing after the last one) and end - begin must equal numel x dtype
 * size, as the reference safetensors crate requires.  Names are unique.
 * Every error names the file, the tensor and a byte offset of the file. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io.h"

struct oct_safetensors {
    char *label;
    const uint8_t *bytes; /* [size] whole file */
    size_t size;
    void *map; /* owned mapping (open) or NULL (parse) */
    size_t map_len;
    uint64_t data_start; /* 8 + N */
    oct_tensor *tensors; /* [n], sorted by data offset */
    char **names;        /* [n] owned name strings the tensors point to */
    int64_t n;
    const oct_tensor **by_name; /* [n] sorted by name */
    char **meta_keys, **meta_vals;
    int n_meta;
};

#define ST_FAIL(err, st, off, ...) (oct_error_set((err), (st), (int64_t)(off), __VA_ARGS__), (st))

/* Validates UTF-8 (no overlongs, no surrogates, <= U+10FFFF).  Returns the
 * index of the first bad byte or len; *in_string says whether that byte lies
 * inside a JSON string (a tensor name or a metadata value). */
static size_t utf8_check(const uint8_t *s, size_t len, bool *in_string)
{
    bool str = false, esc = false;
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80) {
            if (str) {
                if (esc)
                    esc = false;
                else if (c == '\\')
                    esc = true;
                else if (c == '"')
                    str = false;
            } else if (c == '"') {
                str = true;
            }
            i++;
            continue;
        }
        esc = false;
        size_t need;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
            cp = c & 0x1Fu;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            cp = c & 0x0Fu;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            cp = c & 0x07u;
        } else {
            *in_string = str;
            return i;
        }
        if (len - i <= need) {
            *in_string = str;
            return i;
        }
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                *in_string = str;
                return i;
            }
            cp = (cp << 6) | (s[i + k] & 0x3Fu);
        }
        if ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (need == 3 && (cp < 0x10000 || cp > 0x10FFFF))) {
            *in_string = str;
            return i;
        }
        i += need + 1;
    }
    return len;
}

/* A header key being parsed: enough to find its entry when an error needs it. */
typedef struct st_key {
    const uint8_t *hdr; /* [hlen] the header JSON */
    size_t hlen;
    const char *name;
} st_key;

/* Byte offset (in the file) of the first occurrence of "name" in the header,
 * to point errors at the tensor's entry; the header start when not found
 * (names with escapes).  A scan of the whole header: called only on the
 * error path, so that parsing stays linear in the header size. */
static int64_t key_offset(const st_key *k)
{
    size_t nl = strlen(k->name);
    if (nl + 2 <= k->hlen) {
        for (size_t i = 0; i + nl + 2 <= k->hlen; i++) {
            if (k->hdr[i] == '"' && memcmp(k->hdr + i + 1, k->name, nl) == 0 &&
                k->hdr[i + 1 + nl] == '"')
                return (int64_t)(8 + i);
        }
    }
    return 8;
}

static int cmp_by_offset(const void *a, const void *b)
{
    const oct_tensor *x = a, *y = b;
    if (x->file_offset != y->file_offset)
        return x->file_offset < y->file_offset ? -1 : 1;
    if (x->size_bytes != y->size_bytes)
        return x->size_bytes < y->size_bytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_by_name(const void *a, const void *b)
{
    const oct_tensor *x = *(const oct_tensor *const *)a, *y = *(const oct_tensor *const *)b;
    return strcmp(x->name, y->name);
}

void oct_safetensors_free(oct_safetensors *st)
{
    if (!st)
        return;
    for (int64_t i = 0; i < st->n; i++)
        oct_free(st->names[i]);
    oct_free(st->names);
    for (int i = 0; i < st->n_meta; i++) {
        oct_free(st->meta_keys[i]);
        oct_free(st->meta_vals[i]);
    }
    oct_free(st->meta_keys);
    oct_free(st->meta_vals);
    oct_free(st->tensors);
    oct_free(st->by_name);
    if (st->map)
        munmap(st->map, st->map_len);
    oct_free(st->label);
    oct_free(st);
}

static oct_status parse_metadata(oct_safetensors *st, json_t *meta, const st_key *key,
                                 oct_error *err)
{
    if (!json_is_object(meta))
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                       "%s: __metadata__ is not a JSON object", st->label);
    size_t n = json_object_size(meta);
    st->meta_keys = oct_calloc(n ? n : 1, sizeof(char *));
    st->meta_vals = oct_calloc(n ? n : 1, sizeof(char *));
    if (!st->meta_keys || !st->meta_vals)
        return ST_FAIL(err, OCT_ERR_NOMEM, -1, "%s: out of memory", st->label);
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v)
    {
        if (!json_is_string(v))
            return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                           "%s: __metadata__ value of key '%s' is not a string", st->label, k);
        st->meta_keys[st->n_meta] = oct_strdup(k);
        st->meta_vals[st->n_meta] = oct_strdup(json_string_value(v));
        st->n_meta++;
        if (!st->meta_keys[st->n_meta - 1] || !st->meta_vals[st->n_meta - 1])
            return ST_FAIL(err, OCT_ERR_NOMEM, -1, "%s: out of memory", st->label);
    }
    return OCT_OK;
}

/* Fills t from the header entry `v` of tensor `name`; `data_len` is the size
 * of the data section. */
static oct_status parse_entry(oct_safetensors *st, const st_key *key, json_t *v, uint64_t data_len,
                              oct_tensor *t, oct_error *err)
{
    const char *L = st->label, *name = key->name;
    if (!json_is_object(v))
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                       "%s: tensor '%s': entry is not a JSON object", L, name);
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x)
    {
        if (strcmp(k, "dtype") != 0 && strcmp(k, "shape") != 0 && strcmp(k, "data_offsets") != 0)
            return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                           "%s: tensor '%s': unknown key '%s'", L, name, k);
    }
    const json_t *jd = json_object_get(v, "dtype");
    const json_t *js = json_object_get(v, "shape");
    const json_t *jo = json_object_get(v, "data_offsets");
    if (!jd)
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key), "%s: tensor '%s': missing \"dtype\"",
                       L, name);
    if (!js)
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key), "%s: tensor '%s': missing \"shape\"",
                       L, name);
    if (!jo)
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                       "%s: tensor '%s': missing \"data_offsets\"", L, name);
    if (!json_is_string(jd))
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                       "%s: tensor '%s': \"dtype\" is not a string", L, name);
    if (oct_dtype_parse(json_string_value(jd), &t->dtype) != OCT_OK)
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key), "%s: tensor '%s': unknown dtype '%s'",
                       L, name, json_string_value(jd));
    if (!json_is_array(js))
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                       "%s: tensor '%s': \"shape\" is not an array", L, name);
    size_t nd = json_array_size(js);
    if (nd > OCT_MAX_DIMS)
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                       "%s: tensor '%s': shape has %zu dimensions, at most %d are supported", L,
                       name, nd, OCT_MAX_DIMS);
    t->n_dims = (int)nd;
    for (size_t i = 0; i < nd; i++) {
        const json_t *d = json_array_get(js, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                           "%s: tensor '%s': shape[%zu] is not a non-negative integer", L, name, i);
        t->dims[i] = (int64_t)json_integer_value(d);
    }
    size_t numel, bytes;
    if (!oct_shape_numel(t->dims, t->n_dims, &numel) || numel > (size_t)INT64_MAX ||
        !oct_size_mul(numel, oct_dtype_size(t->dtype), &bytes))
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                       "%s: tensor '%s': shape overflows (element count x dtype size does not "
                       "fit in 64 bits)",
                       L, name);
    t->numel = (int64_t)numel;
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                       "%s: tensor '%s': \"data_offsets\" is not an array of 2 integers", L, name);
    const json_t *jb = json_array_get(jo, 0), *je = json_array_get(jo, 1);
    if (!json_is_integer(jb) || !json_is_integer(je) || json_integer_value(jb) < 0 ||
        json_integer_value(je) < 0)
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                       "%s: tensor '%s': data_offsets are not non-negative integers", L, name);
    uint64_t b = (uint64_t)json_integer_value(jb), e = (uint64_t)json_integer_value(je);
    if (b > e)
        return ST_FAIL(err, OCT_ERR_FORMAT, key_offset(key),
                       "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", L, name,
                       (unsigned long long)b, (unsigned long long)e);
    if (e > data_len)
        return ST_FAIL(
            err, OCT_ERR_FORMAT, (int64_t)(st->data_start + (b < data_len ? b : data_len)),
            "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the data "
            "section (%llu bytes)",
            L, name, (unsigned long long)b, (unsigned long long)e, (unsigned long long)data_len);
    if (e - b != (uint64_t)bytes)
        return ST_FAIL(err, OCT_ERR_FORMAT, (int64_t)(st->data_start + b),
                       "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but %s with "
                       "%lld elements needs %zu",
                       L, name, (unsigned long long)b, (unsigned long long)e,
                       (unsigned long long)(e - b), oct_dtype_str(t->dtype), (long long)t->numel,
                       bytes);
    char *copy = oct_strdup(name);
    if (!copy)
        return ST_FAIL(err, OCT_ERR_NOMEM, -1, "%s: out of memory", L);
    st->names[st->n] = copy;
    t->name = copy;
    t->data = st->bytes + st->data_start + b;
    t->size_bytes = bytes;
    t->file_offset = st->data_start + b;
    t->file = st->label;
    return OCT_OK;
}

/* Sorts the tensors by offset and checks that they tile the data section:
 * no overlap, no gap, nothing after the last one. */
static oct_status check_tiling(oct_safetensors *st, oct_error *err)
{
    const char *L = st->label;
    qsort(st->tensors, (size_t)st->n, sizeof(oct_tensor), cmp_by_offset);
    uint64_t expect = st->data_start;
    for (int64_t i = 0; i < st->n; i++) {
        const oct_tensor *t = &st->tensors[i];
        if (t->file_offset < expect)
            return ST_FAIL(err, OCT_ERR_FORMAT, (int64_t)t->file_offset,
                           "%s: tensor '%s': data at byte %llu overlaps tensor '%s' (which ends "
                           "at byte %llu)",
                           L, t->name, (unsigned long long)t->file_offset, st->tensors[i - 1].name,
                           (unsigned long long)expect);
        if (t->file_offset > expect)
            return ST_FAIL(err, OCT_ERR_FORMAT, (int64_t)expect,
                           "%s: tensor '%s': gap of %llu unused bytes before its data (bytes "
                           "%llu..%llu)",
                           L, t->name, (unsigned long long)(t->file_offset - expect),
                           (unsigned long long)expect, (unsigned long long)t->file_offset);
        expect = t->file_offset + t->size_bytes;
    }
    if (expect != st->size)
        return ST_FAIL(err, OCT_ERR_FORMAT, (int64_t)expect,
                       "%s: %llu trailing bytes after the last tensor's data (byte %llu)", L,
                       (unsigned long long)(st->size - expect), (unsigned long long)expect);
    return OCT_OK;
}

/* by_name: the tensors sorted by name, for oct_safetensors_find. */
static oct_status index_names(oct_safetensors *st, oct_error *err)
{
    st->by_name = oct_calloc(st->n ? (size_t)st->n : 1, sizeof(*st->by_name));
    if (!st->by_name)
        return ST_FAIL(err, OCT_ERR_NOMEM, -1, "%s: out of memory", st->label);
    for (int64_t i = 0; i < st->n; i++)
        st->by_name[i] = &st->tensors[i];
    qsort(st->by_name, (size_t)st->n, sizeof(*st->by_name), cmp_by_name);
    return OCT_OK;
}

static oct_status parse_header(oct_safetensors *st, oct_error *err)
{
    const char *L = st->label;
    if (st->size == 0)
        return ST_FAIL(err, OCT_ERR_FORMAT, 0, "%s: truncated: the file is empty", L);
    if (st->size < 8)
        return ST_FAIL(err, OCT_ERR_FORMAT, 0,
                       "%s: truncated: %zu bytes, shorter than the 8-byte header length", L,
                       st->size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | st->bytes[i];
    if (hlen > st->size - 8)
        return ST_FAIL(err, OCT_ERR_FORMAT, 0,
                       "%s: header length %llu (byte 0) runs past the end of the file "
                       "(%zu bytes)",
                       L, (unsigned long long)hlen, st->size);
    if (hlen > OCT_ST_MAX_HEADER)
        return ST_FAIL(err, OCT_ERR_FORMAT, 0, "%s: header length %llu exceeds the %u-byte limit",
                       L, (unsigned long long)hlen, OCT_ST_MAX_HEADER);
    if (hlen < 2)
        return ST_FAIL(err, OCT_ERR_FORMAT, 0,
                       "%s: header length %llu is too short for a JSON object", L,
                       (unsigned long long)hlen);
    const uint8_t *hdr = st->bytes + 8;
    if (hdr[0] != '{')
        return ST_FAIL(err, OCT_ERR_FORMAT, 8, "%s: header does not start with '{' (byte 8)", L);
    bool in_string = false;
    size_t bad = utf8_check(hdr, (size_t)hlen, &in_string);
    if (bad != hlen)
        return ST_FAIL(
            err, OCT_ERR_FORMAT, (int64_t)(8 + bad),
            "%s: header is not valid UTF-8 at byte %llu (%s)", L, (unsigned long long)(8 + bad),
            in_string ? "inside a string: a tensor name or metadata" : "outside strings");
    st->data_start = 8 + hlen;
    uint64_t data_len = st->size - st->data_start;

    json_error_t jerr;
    json_t *root = json_loadb((const char *)hdr, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        int64_t off = 8 + (int64_t)jerr.position;
        if (strstr(jerr.text, "duplicate object key"))
            return ST_FAIL(err, OCT_ERR_FORMAT, off,
                           "%s: duplicate tensor name in the header near byte %lld (%s)", L,
                           (long long)off, jerr.text);
        return ST_FAIL(err, OCT_ERR_FORMAT, off,
                       "%s: header is not valid JSON: %s (line %d, column %d, byte %lld)", L,
                       jerr.text, jerr.line, jerr.column, (long long)off);
    }
    oct_status rc = OCT_OK;
    if (!json_is_object(root)) {
        rc = ST_FAIL(err, OCT_ERR_FORMAT, 8, "%s: header is not a JSON object", L);
        goto out;
    }
    size_t n_all = json_object_size(root);
    st->tensors = oct_calloc(n_all ? n_all : 1, sizeof(oct_tensor));
    st->names = oct_calloc(n_all ? n_all : 1, sizeof(char *));
    if (!st->tensors || !st->names) {
        rc = ST_FAIL(err, OCT_ERR_NOMEM, -1, "%s: out of memory", L);
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        st_key k = {hdr, (size_t)hlen, key};
        if (strcmp(key, "__metadata__") == 0) {
            rc = parse_metadata(st, val, &k, err);
        } else {
            rc = parse_entry(st, &k, val, data_len, &st->tensors[st->n], err);
            if (rc == OCT_OK)
                st->n++;
        }
        if (rc != OCT_OK)
            goto out;
    }
    rc = check_tiling(st, err);
    if (rc == OCT_OK)
        rc = index_names(st, err);
out:
    json_decref(root);
    return rc;
}

oct_status oct_safetensors_parse(const void *bytes, size_t size, const char *label,
                                 oct_safetensors **out, oct_error *err)
{
    if (!out || (!bytes && size > 0))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_safetensors_parse: bad arguments");
    *out = NULL;
    oct_safetensors *st = oct_calloc(1, sizeof *st);
    if (!st)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    st->label = oct_strdup(label ? label : "<memory>");
    st->bytes = bytes;
    st->size = size;
    if (!st->label) {
        oct_safetensors_free(st);
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    }
    oct_status rc = parse_header(st, err);
    if (rc != OCT_OK) {
        oct_safetensors_free(st);
        return rc;
    }
    *out = st;
    return OCT_OK;
}

oct_status oct_safetensors_open(const char *path, oct_safetensors **out, oct_error *err)
{
    if (!path || !out)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_safetensors_open: bad arguments");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return oct_error_set(err, errno == ENOENT ? OCT_ERR_NOT_FOUND : OCT_ERR_IO, -1,
                             "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return oct_error_set(err, OCT_ERR_IO, -1, "%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return oct_error_set(err, OCT_ERR_IO, -1, "%s: mmap failed: %s", path, strerror(e));
        }
    }
    close(fd);
    oct_safetensors *st = NULL;
    oct_status rc = oct_safetensors_parse(map, size, path, &st, err);
    if (rc != OCT_OK) {
        if (map)
            munmap(map, size);
        return rc;
    }
    st->map = map;
    st->map_len = size;
    *out = st;
    return OCT_OK;
}

int64_t oct_safetensors_count(const oct_safetensors *st)
{
    return st ? st->n : 0;
}

const oct_tensor *oct_safetensors_at(const oct_safetensors *st, int64_t i)
{
    if (!st || i < 0 || i >= st->n)
        return NULL;
    return &st->tensors[i];
}

const oct_tensor *oct_safetensors_find(const oct_safetensors *st, const char *name)
{
    if (!st || !name)
        return NULL;
    int64_t lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const oct_tensor *t = st->by_name[mid];
        int c = strcmp(name, t->name);
        if (c == 0)
            return t;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *oct_safetensors_metadata(const oct_safetensors *st, const char *key)
{
    if (!st || !key)
        return NULL;
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0)
            return st->meta_vals[i];
    return NULL;
}

size_t oct_safetensors_file_size(const oct_safetensors *st)
{
    return st ? st->size : 0;
}
