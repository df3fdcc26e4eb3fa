/* guard.c — Host / Origin / Content-Type checks (see guard.h).
 *
 * Accepted Host forms: reg-name or IPv4 ("localhost", "127.0.0.1") or an
 * IPv6 literal in brackets ("[::1]"), each optionally followed by ":digits".
 * Names compare case-insensitively, without the port and brackets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "server/guard.h"

static const char *const k_loopback[] = {"localhost", "127.0.0.1", "::1"};

/* Splits an authority into its host name (brackets dropped); false when the
 * port part is not ":digits" or the name is empty. */
static bool split_authority(const char *a, size_t len, const char **name, size_t *nlen)
{
    size_t end;
    if (len && a[0] == '[') {
        const char *rb = memchr(a, ']', len);
        if (!rb)
            return false;
        *name = a + 1;
        *nlen = (size_t)(rb - a) - 1;
        end = (size_t)(rb - a) + 1;
    } else {
        const char *colon = memchr(a, ':', len);
        *name = a;
        *nlen = colon ? (size_t)(colon - a) : len;
        end = *nlen;
    }
    if (*nlen == 0)
        return false;
    if (end == len)
        return true;
    if (a[end] != ':' || end + 1 == len)
        return false;
    for (size_t i = end + 1; i < len; i++)
        if (a[i] < '0' || a[i] > '9')
            return false;
    return true;
}

static bool same_name(const char *a, size_t alen, const char *b, size_t blen)
{
    if (blen >= 2 && b[0] == '[' && b[blen - 1] == ']')
        b++, blen -= 2;
    return alen == blen && strncasecmp(a, b, alen) == 0;
}

static bool name_allowed(const srv_hosts *h, const char *name, size_t nlen)
{
    for (size_t i = 0; i < sizeof k_loopback / sizeof k_loopback[0]; i++)
        if (same_name(name, nlen, k_loopback[i], strlen(k_loopback[i])))
            return true;
    for (const char *p = h->list; p && *p;) {
        size_t n = strcspn(p, ",");
        if (same_name(name, nlen, p, n))
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

/* Every comma-separated entry is non-empty ("a,,b", ",a" and "a," are not). */
static bool list_ok(const char *s)
{
    for (const char *p = s;;) {
        size_t n = strcspn(p, ",");
        if (n == 0)
            return false;
        if (!p[n])
            return true;
        p += n + 1;
    }
}

bool srv_hosts_init(srv_hosts *h, const char *spec, bool bound_loopback)
{
    memset(h, 0, sizeof *h);
    if (!spec || !*spec) {
        h->check = bound_loopback;
        return true;
    }
    if (strcmp(spec, "*") == 0)
        return true;
    if (!list_ok(spec))
        return false;
    h->list = oct_strdup(spec);
    h->check = true;
    return h->list != NULL;
}

void srv_hosts_free(srv_hosts *h)
{
    oct_free(h->list);
    memset(h, 0, sizeof *h);
}

bool srv_host_allowed(const srv_hosts *h, const char *host)
{
    if (!h->check || !host)
        return true;
    const char *name;
    size_t nlen;
    return split_authority(host, strlen(host), &name, &nlen) && name_allowed(h, name, nlen);
}

bool srv_origin_allowed(const srv_hosts *h, const char *origin)
{
    if (!h->check || !origin)
        return true;
    const char *sep = strstr(origin, "://");
    if (!sep)
        return false; /* "null" (file:, sandboxed frames) or garbage */
    const char *a = sep + 3;
    size_t len = strcspn(a, "/?#");
    const char *name;
    size_t nlen;
    return split_authority(a, len, &name, &nlen) && name_allowed(h, name, nlen);
}

bool srv_is_json_type(const char *ct)
{
    if (!ct)
        return false;
    ct += strspn(ct, " \t");
    static const char k_json[] = "application/json";
    size_t n = sizeof k_json - 1;
    if (strncasecmp(ct, k_json, n) != 0)
        return false;
    ct += n;
    ct += strspn(ct, " \t");
    return *ct == 0 || *ct == ';';
}
