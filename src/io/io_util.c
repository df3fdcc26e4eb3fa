/* io_util.c — small file and JSON helpers for src/io/: bounded whole-file
 * reads, atomic writes (temp name, fsync, rename), and typed JSON getters
 * whose errors name the key. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io.h"

oct_status io_read_text(const char *path, size_t max_size, char **out, size_t *len, oct_error *err)
{
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
    if ((uint64_t)sb.st_size > max_size) {
        close(fd);
        return oct_error_set(err, OCT_ERR_LIMIT, -1, "%s: %lld bytes, more than the %zu-byte limit",
                             path, (long long)sb.st_size, max_size);
    }
    size_t size = (size_t)sb.st_size;
    char *buf = oct_malloc(size + 1);
    if (!buf) {
        close(fd);
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            close(fd);
            oct_free(buf);
            return oct_error_set(err, OCT_ERR_IO, -1, "%s: read failed", path);
        }
        got += (size_t)r;
    }
    close(fd);
    buf[size] = 0;
    *out = buf;
    if (len)
        *len = size;
    return OCT_OK;
}

char *io_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = oct_malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a > 0 && dir[a - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

bool io_file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static oct_status write_all(int fd, const void *data, size_t len, const char *path, oct_error *err)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return oct_error_set(err, OCT_ERR_IO, -1, "%s: write failed: %s", path,
                                 strerror(errno));
        p += w;
        len -= (size_t)w;
    }
    return OCT_OK;
}

void io_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

oct_status io_write_atomic(const char *path, const void *data, size_t len, oct_error *err)
{
    char *tmp = oct_malloc(strlen(path) + 8);
    if (!tmp)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    sprintf(tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        oct_status st =
            oct_error_set(err, OCT_ERR_IO, -1, "%s: cannot create: %s", tmp, strerror(errno));
        oct_free(tmp);
        return st;
    }
    oct_status st = write_all(fd, data, len, tmp, err);
    if (st == OCT_OK && fsync(fd) != 0)
        st = oct_error_set(err, OCT_ERR_IO, -1, "%s: fsync failed: %s", tmp, strerror(errno));
    close(fd);
    if (st == OCT_OK && rename(tmp, path) != 0)
        st = oct_error_set(err, OCT_ERR_IO, -1, "%s: rename to %s failed: %s", tmp, path,
                           strerror(errno));
    if (st != OCT_OK)
        unlink(tmp);
    oct_free(tmp);
    return st;
}

oct_status io_copy_file(const char *src, const char *dst, oct_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    oct_status st = io_read_text(src, (size_t)1 << 31, &buf, &len, err);
    if (st != OCT_OK)
        return st;
    st = io_write_atomic(dst, buf, len, err);
    oct_free(buf);
    return st;
}

oct_status io_json_parse(const char *text, size_t len, const char *label, json_t **out,
                         oct_error *err)
{
    json_error_t jerr;
    *out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!*out)
        return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)jerr.position,
                             "%s: invalid JSON: %s (line %d, column %d)", label, jerr.text,
                             jerr.line, jerr.column);
    return OCT_OK;
}

/* Looks up key; NULL for absent or JSON null; required+absent fills err. */
static const json_t *get(const json_t *obj, const char *key, const char *where, bool required,
                         oct_status *st, oct_error *err)
{
    *st = OCT_OK;
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    if (v && json_is_null(v))
        v = NULL;
    if (!v && required)
        *st = oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: required key is missing", where, key);
    return v;
}

oct_status io_json_int(const json_t *obj, const char *key, const char *where, bool required,
                       int64_t *out, oct_error *err)
{
    oct_status st;
    const json_t *v = get(obj, key, where, required, &st, err);
    if (!v)
        return st;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return OCT_OK;
    }
    /* 4096.0 is an integer in Python's eyes; accept exact whole reals. */
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == (double)(int64_t)d) {
            *out = (int64_t)d;
            return OCT_OK;
        }
    }
    return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: expected an integer", where, key);
}

oct_status io_json_num(const json_t *obj, const char *key, const char *where, bool required,
                       double *out, oct_error *err)
{
    oct_status st;
    const json_t *v = get(obj, key, where, required, &st, err);
    if (!v)
        return st;
    if (!json_is_number(v))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: expected a number", where, key);
    *out = json_number_value(v);
    return OCT_OK;
}

oct_status io_json_bool(const json_t *obj, const char *key, const char *where, bool required,
                        bool *out, oct_error *err)
{
    oct_status st;
    const json_t *v = get(obj, key, where, required, &st, err);
    if (!v)
        return st;
    if (!json_is_boolean(v))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: expected true or false", where, key);
    *out = json_is_true(v);
    return OCT_OK;
}

oct_status io_json_str(const json_t *obj, const char *key, const char *where, bool required,
                       const char **out, oct_error *err)
{
    oct_status st;
    *out = NULL;
    const json_t *v = get(obj, key, where, required, &st, err);
    if (!v)
        return st;
    if (!json_is_string(v))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: expected a string", where, key);
    *out = json_string_value(v);
    return OCT_OK;
}

oct_status io_json_block_shape(const json_t *obj, const char *key, const char *where, bool required,
                               bool *found, int64_t *rows, int64_t *cols, oct_error *err)
{
    oct_status st;
    *found = false;
    const json_t *v = get(obj, key, where, required, &st, err);
    if (!v)
        return st;
    const json_t *r = json_array_get(v, 0), *c = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(r) ||
        !json_is_integer(c) || json_integer_value(r) <= 0 || json_integer_value(c) <= 0 ||
        json_integer_value(r) > 65536 || json_integer_value(c) > 65536)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s.%s: expected [rows, cols], two integers in 1..65536", where, key);
    *found = true;
    *rows = (int64_t)json_integer_value(r);
    *cols = (int64_t)json_integer_value(c);
    return OCT_OK;
}

oct_status io_json_str_array(const json_t *obj, const char *key, const char *where,
                             const char ***out, int *n, oct_error *err)
{
    *out = NULL;
    *n = 0;
    oct_status st;
    const json_t *v = get(obj, key, where, false, &st, err);
    if (!v)
        return st;
    if (json_is_string(v)) { /* a lone string is a one-entry list */
        *out = oct_malloc(sizeof(char *));
        if (!*out)
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        (*out)[0] = json_string_value(v);
        *n = 1;
        return OCT_OK;
    }
    if (!json_is_array(v))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: expected a list of strings", where,
                             key);
    size_t cnt = json_array_size(v);
    if (cnt > 1000000)
        return oct_error_set(err, OCT_ERR_LIMIT, -1, "%s.%s: too many entries", where, key);
    *out = oct_calloc(cnt ? cnt : 1, sizeof(char *));
    if (!*out)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    for (size_t i = 0; i < cnt; i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_string(e)) {
            oct_free(*out);
            *out = NULL;
            return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s[%zu]: expected a string", where,
                                 key, i);
        }
        (*out)[i] = json_string_value(e);
    }
    *n = (int)cnt;
    return OCT_OK;
}
