/* gate.h — the listening socket and the connection gate in front of
 * libmicrohttpd.
 *
 * One thread accepts every connection and holds it, as a bare socket in
 * one epoll set, until its request line and headers have arrived (read
 * with MSG_PEEK, so they stay in the socket for libmicrohttpd): a
 * connection that has not sent them within the header deadline, or that
 * sends nothing for the idle timeout, gets 408 and is closed.  Waiting
 * connections and handed-over ones share max_connections slots: a new
 * connection evicts the one that has waited longest for its headers (503)
 * when the waiting ones fill the free slots.  When every slot is handed
 * over, a few more may wait, and only GET /health and GET /metrics pass;
 * other requests get 503.  Headers with a malformed Content-Length, or
 * sent in tiny pieces, get 400 here, oversized ones 431.  The rest are
 * handed to libmicrohttpd.
 *
 * A handed-over connection is a slot, tracked from libmicrohttpd's
 * connection callbacks: the same thread shuts down a slot whose body misses
 * its deadline or minimum rate, and watches the slots whose requests wait
 * on a generation for the client hanging up.  Thread-safe. */
#ifndef OCTET_SERVER_GATE_H
#define OCTET_SERVER_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "octet.h"

typedef struct srv_gate srv_gate;
typedef struct srv_slot srv_slot;

typedef struct srv_gate_opts {
    int max_connections;     /* held by the gate and handed over, together */
    double header_timeout_s; /* request line + headers, from the accept */
    double idle_timeout_s;   /* headers: no new byte for this long; 0: off */
    double body_timeout_s;   /* body, from the end of the headers */
    double body_min_rate;    /* bytes/s a body averages after its first second; 0: off */
    size_t max_header_bytes; /* request line + headers; 431 beyond */
    /* Takes a connection whose headers are complete and owns fd from then
     * on; false when it was refused (and closed). */
    bool (*hand_off)(void *user, int fd, const struct sockaddr *addr, socklen_t addr_len);
    void *user;
} srv_gate_opts;

typedef struct srv_gate_stats {
    int64_t waiting;     /* connections the gate holds */
    int64_t handed;      /* slots (connections libmicrohttpd holds) */
    uint64_t dropped[6]; /* by srv_drop reason */
} srv_gate_stats;

typedef enum srv_drop {
    SRV_DROP_HEADER_TIMEOUT,
    SRV_DROP_BODY_TIMEOUT,
    SRV_DROP_BODY_RATE,
    SRV_DROP_EVICTED,
    SRV_DROP_REFUSED,
    SRV_DROP_BAD_HEADER,
} srv_drop;

const char *srv_drop_name(srv_drop d);

/* Binds and listens on addr and starts the gate thread; *out owns both. */
oct_status srv_gate_create(const srv_gate_opts *o, const struct sockaddr *addr, socklen_t addr_len,
                           srv_gate **out, oct_error *err);
int srv_gate_port(const srv_gate *g);
/* Stops accepting and closes every connection still held by the gate. */
void srv_gate_stop(srv_gate *g);
/* Stops (if still running) and frees; every slot must be closed.  NULL: no-op. */
void srv_gate_free(srv_gate *g);
void srv_gate_get_stats(srv_gate *g, srv_gate_stats *st);

/* Slot lifetime, from libmicrohttpd's connection callbacks: opened when a
 * handed-over connection starts (its header deadline runs again from now),
 * closed before its socket is. */
srv_slot *srv_gate_slot_open(srv_gate *g, int fd);
void srv_gate_slot_close(srv_gate *g, srv_slot *s);
/* Headers done: the body deadline and rate apply from now. */
void srv_gate_slot_body(srv_gate *g, srv_slot *s);
void srv_gate_slot_bytes(srv_gate *g, srv_slot *s, size_t n);
/* Body done: no deadline until the next request (srv_gate_slot_next). */
void srv_gate_slot_work(srv_gate *g, srv_slot *s);
void srv_gate_slot_next(srv_gate *g, srv_slot *s);
/* gone(user) is called once, from the gate thread, when the client hangs
 * up; NULL stops watching.  The call never overlaps srv_gate_slot_watch. */
void srv_gate_slot_watch(srv_gate *g, srv_slot *s, void (*gone)(void *user), void *user);

#endif
