/* guard.h — checks on a request's headers, made before its body is read.
 *
 * Host and Origin are matched against the allowed host names so that a web
 * page cannot drive a server bound to loopback: a cross-site request carries
 * the page's Origin, and a DNS-rebound one carries the attacker's name in
 * Host.  Pure functions over header values (no MHD types). */
#ifndef OCTET_SERVER_GUARD_H
#define OCTET_SERVER_GUARD_H

#include <stdbool.h>
#include <stddef.h>

typedef struct srv_hosts {
    bool check; /* false: any Host and any Origin */
    char *list; /* extra allowed names, comma-separated (owned), NULL when none */
} srv_hosts;

/* spec: NULL or "" (loopback names only when bound to loopback, anything
 * otherwise), "*" (anything), or "name[,name...]" (loopback names plus
 * these).  False when out of memory or a name is empty. */
bool srv_hosts_init(srv_hosts *h, const char *spec, bool bound_loopback);
void srv_hosts_free(srv_hosts *h);

/* Host header value ("name", "name:port", "[v6]:port").  NULL (an HTTP/1.0
 * request without Host, which no browser sends) is allowed. */
bool srv_host_allowed(const srv_hosts *h, const char *host);
/* Origin header value ("scheme://host[:port]"); NULL is allowed, "null" is not. */
bool srv_origin_allowed(const srv_hosts *h, const char *origin);

/* Content-Type is application/json, parameters (charset=...) allowed. */
bool srv_is_json_type(const char *content_type);

#endif
