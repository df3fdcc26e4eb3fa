/* io_util.c — small file and JSON helpers for src/io/: bounded whole-file
 * reads and atomic writes (temp name, fsync, rename). */
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
