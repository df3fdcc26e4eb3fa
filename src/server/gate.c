/* gate.c — the listening socket, the header gate and the slot deadlines
 * (see gate.h).
 *
 * Headers are read with MSG_PEEK into one buffer of max_header_bytes + 1
 * bytes, on the edges of an edge-triggered epoll set (see worth_a_look): a
 * connection costs its socket and one small record until its headers are
 * complete.  Their
 * end is the first empty line (LF or CRLF) after the request line; the
 * Content-Length values (with any folded continuation) must be digits
 * that fit 64 bits, as libmicrohttpd will parse them.
 *
 * The gate thread also runs the clock: every TICK_MS it expires waiting
 * connections (kept in accept order: the head is the one to evict), looks
 * at their new bytes, checks the slots' deadlines and polls the watched
 * slots for a hang-up. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <linux/sock_diag.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "server/gate.h"

#define TICK_MS 50
#define N_EVENTS 64
/* Accepts per turn of the loop: a flood of connections still leaves the
 * waiting ones and the clock their turn. */
#define ACCEPT_BATCH 256
/* After EMFILE / ENFILE the listening socket rests this long. */
#define ACCEPT_PAUSE_S 0.1
/* Peeks a waiting connection gets at once (see worth_a_look). */
#define EAGER_PEEKS 8
#define SLOW_PEEK_S 1.0
/* Headers in tiny pieces are refused: no client sends them so, and a
 * socket holding thousands of one-byte segments costs the kernel the square
 * of their number to peek.  Seen two ways: TINY_PIECES edges averaging
 * under TINY_BYTES bytes, or buffered segments taking over TINY_RMEM bytes
 * of memory, TINY_OVERHEAD times the bytes they hold (SO_MEMINFO; the
 * edges can merge when the gate is busy, the segments do not). */
#define TINY_PIECES 32
#define TINY_BYTES 32
#define TINY_RMEM (64 * 1024)
#define TINY_OVERHEAD 64
/* Input drained after an error reply so that close() sends FIN, not RST. */
#define DRAIN_BYTES 65536
/* Connections the gate takes beyond max_connections when every slot is
 * handed over: only GET /health and GET /metrics pass with them. */
#define PROBE_RESERVE 16
/* drop_gconn's reason for a close that is not counted (hang-up, shutdown). */
#define NOT_COUNTED (-1)

typedef struct gconn {
    int fd;
    double t_accept, t_last;    /* the accept, the last new bytes */
    size_t n_seen;              /* bytes buffered in the socket, as last seen */
    size_t n_peeked;            /* bytes the last peek looked at */
    unsigned n_peeks, n_pieces; /* peeks made; edges with new bytes */
    double t_peek;              /* the last peek */
    struct sockaddr_storage addr;
    socklen_t addr_len;
    struct gconn *prev, *next;
} gconn;

typedef enum slot_phase { PH_HEADERS, PH_BODY, PH_WORK, PH_DEAD } slot_phase;

struct srv_slot {
    int fd;
    slot_phase phase;
    double t_phase; /* when the phase began */
    size_t body_bytes;
    uint64_t id;
    void (*gone)(void *user);
    void *gone_user;
    srv_slot *prev, *next;
};

struct srv_gate {
    srv_gate_opts o;
    int lfd, ep, stop_fd, port;
    pthread_t th;
    bool started, stopped;
    char *peek; /* [max_header_bytes + 1] */
    bool listening;
    double resume_at, last_tick;
    gconn *head, *tail; /* accept order: head is the oldest */

    pthread_mutex_t mu; /* guards everything below */
    int64_t n_wait, n_slots, n_passing;
    srv_slot *slots;
    uint64_t next_id;
    uint64_t dropped[6];
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

const char *srv_drop_name(srv_drop d)
{
    static const char *const k[] = {"header_timeout", "body_timeout", "body_rate",
                                    "evicted",        "refused",      "bad_header"};
    return (unsigned)d < sizeof k / sizeof k[0] ? k[d] : "?";
}

static void count_drop(srv_gate *g, srv_drop d)
{
    pthread_mutex_lock(&g->mu);
    g->dropped[d]++;
    pthread_mutex_unlock(&g->mu);
}

/* ------------------------------------------------------------- replies */

/* Best effort: one non-blocking send of an OpenAI error, then the input
 * that is already there is read and dropped, and the socket closed. */
static void reply_close(int fd, int status, const char *reason, const char *msg)
{
    char body[256], all[512];
    int bn = snprintf(body, sizeof body,
                      "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":null,\"code\":%d}}",
                      msg, status >= 500 ? "server_error" : "invalid_request_error", status);
    int n = snprintf(all, sizeof all,
                     "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\n\r\n%s",
                     status, reason, bn, body);
    if (send(fd, all, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
        shutdown(fd, SHUT_WR);
        char sink[4096];
        for (size_t got = 0; got < DRAIN_BYTES;) {
            ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
    }
    close(fd);
}

/* ------------------------------------------------------------- headers */

/* End of the header block (one past its empty line), 0 when not there yet. */
static size_t header_end(const char *b, size_t n)
{
    size_t i = 0;
    while (i < n && (b[i] == '\r' || b[i] == '\n')) /* empty lines before the request line */
        i++;
    for (; i < n; i++) {
        if (b[i] != '\n')
            continue;
        size_t j = i + 1;
        if (j < n && b[j] == '\r')
            j++;
        if (j < n && b[j] == '\n')
            return j + 1;
    }
    return 0;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* A Content-Length value: digits (surrounding blanks allowed) within 64 bits. */
static bool length_ok(const char *v, size_t n)
{
    while (n && is_ws(*v))
        v++, n--;
    while (n && is_ws(v[n - 1]))
        n--;
    if (n == 0)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        uint64_t d = (uint64_t)(v[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return false;
        x = x * 10 + d;
    }
    return true;
}

/* Every Content-Length header of the block [b, b + n) is well-formed; a
 * folded continuation line belongs to the header above it. */
static bool lengths_ok(const char *b, size_t n)
{
    static const char k_cl[] = "content-length:";
    const size_t kl = sizeof k_cl - 1;
    const char *p = memchr(b, '\n', n), *end = b + n;
    bool in_cl = false;
    while (p && ++p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (len && (p[0] == ' ' || p[0] == '\t')) {
            size_t k = 0;
            while (k < len && is_ws(p[k]))
                k++;
            if (in_cl && k < len)
                return false; /* "Content-Length: 1\r\n 2": not one number */
        } else {
            in_cl = len >= kl && strncasecmp(p, k_cl, kl) == 0;
            if (in_cl && !length_ok(p + kl, len - kl))
                return false;
        }
        p = nl;
    }
    return true;
}

/* ---------------------------------------------------------- the waiting */

static void unlink_gconn(srv_gate *g, gconn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        g->tail = c->prev;
    pthread_mutex_lock(&g->mu);
    g->n_wait--;
    pthread_mutex_unlock(&g->mu);
}

/* Removes c from the gate; fd stays open. */
static int take_gconn(srv_gate *g, gconn *c)
{
    int fd = c->fd;
    epoll_ctl(g->ep, EPOLL_CTL_DEL, fd, NULL);
    unlink_gconn(g, c);
    return fd;
}

static void drop_gconn(srv_gate *g, gconn *c, int why, int status, const char *reason,
                       const char *msg)
{
    int fd = take_gconn(g, c);
    free(c);
    if (status)
        reply_close(fd, status, reason, msg);
    else
        close(fd);
    if (why != NOT_COUNTED)
        count_drop(g, (srv_drop)why);
}

static void hand_off(srv_gate *g, gconn *c)
{
    int fd = take_gconn(g, c);
    pthread_mutex_lock(&g->mu);
    g->n_passing++;
    pthread_mutex_unlock(&g->mu);
    bool taken = g->o.hand_off(g->o.user, fd, (const struct sockaddr *)&c->addr, c->addr_len);
    free(c);
    if (!taken) {
        pthread_mutex_lock(&g->mu);
        if (g->n_passing > 0)
            g->n_passing--;
        pthread_mutex_unlock(&g->mu);
    }
}

/* Every slot is handed over. */
static bool full(srv_gate *g)
{
    pthread_mutex_lock(&g->mu);
    bool f = g->n_slots + g->n_passing >= g->o.max_connections;
    pthread_mutex_unlock(&g->mu);
    return f;
}

/* A request line for the health check or the metrics (always cheap). */
static bool is_probe(const char *b, size_t n)
{
    while (n && (*b == '\r' || *b == '\n'))
        b++, n--;
    static const char *const k[] = {"GET /health ", "GET /metrics "};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (n >= strlen(k[i]) && memcmp(b, k[i], strlen(k[i])) == 0)
            return true;
    return false;
}

/* Whether to peek now.  A peek copies from the first byte and walks every
 * segment the socket holds, so a client that sends its headers in many
 * small pieces is looked at on its first EAGER_PEEKS new pieces, then when
 * its buffered bytes double, and at most every SLOW_PEEK_S on the tick: not
 * on every piece (which would cost the square of the header size). */
static bool worth_a_look(const srv_gate *g, gconn *c, bool hup, bool tick)
{
    int avail = 0;
    if (ioctl(c->fd, FIONREAD, &avail) != 0 || avail < 0)
        return true;
    size_t n = (size_t)avail;
    if (n > c->n_seen) {
        c->n_seen = n;
        c->t_last = mono_s();
        c->n_pieces += !tick;
    }
    if (hup)
        return true;
    if (n == c->n_peeked)
        return false;
    if (n >= 2 * c->n_peeked || n > g->o.max_header_bytes || c->n_peeks < EAGER_PEEKS)
        return true;
    return tick && mono_s() - c->t_peek >= SLOW_PEEK_S;
}

static bool tiny_edges(const gconn *c)
{
    return c->n_pieces >= TINY_PIECES && c->n_seen < (size_t)c->n_pieces * TINY_BYTES;
}

static bool tiny_segments(const gconn *c)
{
    uint32_t mem[SK_MEMINFO_VARS];
    socklen_t len = sizeof mem;
    if (getsockopt(c->fd, SOL_SOCKET, SO_MEMINFO, mem, &len) != 0 ||
        len < sizeof mem[0] * (SK_MEMINFO_RMEM_ALLOC + 1))
        return false;
    size_t rmem = mem[SK_MEMINFO_RMEM_ALLOC];
    return rmem > TINY_RMEM && rmem / TINY_OVERHEAD > c->n_seen;
}

/* New bytes (or a hang-up) on a waiting connection, or the tick. */
static void gconn_ready(srv_gate *g, gconn *c, uint32_t events, bool tick)
{
    bool hup = (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
    bool look = worth_a_look(g, c, hup, tick);
    if (tiny_edges(c) || (look && tiny_segments(c))) {
        drop_gconn(g, c, SRV_DROP_BAD_HEADER, 400, "Bad Request",
                   "the request headers came in too many small pieces");
        return;
    }
    if (!look)
        return;
    c->n_peeks++;
    c->t_peek = mono_s();
    size_t cap = g->o.max_header_bytes + 1;
    ssize_t n = recv(c->fd, g->peek, cap, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        n = -2;
    if (n == 0 || n == -1) {
        drop_gconn(g, c, NOT_COUNTED, 0, NULL, NULL);
        return;
    }
    if (n > 0)
        c->n_peeked = (size_t)n;
    size_t end = n > 0 ? header_end(g->peek, (size_t)n) : 0;
    if (end && !lengths_ok(g->peek, end)) {
        drop_gconn(g, c, SRV_DROP_BAD_HEADER, 400, "Bad Request", "invalid Content-Length header");
        return;
    }
    if (end && (!full(g) || is_probe(g->peek, end))) {
        hand_off(g, c);
        return;
    }
    if (end) {
        drop_gconn(g, c, SRV_DROP_REFUSED, 503, "Service Unavailable", "too many connections");
        return;
    }
    if (n > 0 && (size_t)n >= cap) {
        drop_gconn(g, c, SRV_DROP_BAD_HEADER, 431, "Request Header Fields Too Large",
                   "the request headers are too large");
        return;
    }
    if (hup)
        drop_gconn(g, c, NOT_COUNTED, 0, NULL, NULL);
}

/* Room for one more waiting connection: the oldest waiting one is evicted
 * when the waiting ones fill the slots not handed over, or, when all are
 * handed over, PROBE_RESERVE more. */
static void make_room(srv_gate *g)
{
    pthread_mutex_lock(&g->mu);
    int64_t handed = g->n_slots + g->n_passing, max = g->o.max_connections;
    pthread_mutex_unlock(&g->mu);
    int64_t may_wait = handed >= max ? PROBE_RESERVE : max - handed;
    if (g->head && g->n_wait >= may_wait)
        drop_gconn(g, g->head, SRV_DROP_EVICTED, 503, "Service Unavailable",
                   "too many connections are waiting for their headers");
}

static void admit(srv_gate *g, int fd, const struct sockaddr_storage *addr, socklen_t alen)
{
    make_room(g);
    gconn *c = calloc(1, sizeof *c);
    struct epoll_event ev = {EPOLLIN | EPOLLRDHUP | EPOLLET, {.ptr = c}};
    if (!c || epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        free(c);
        close(fd);
        return;
    }
    c->fd = fd;
    c->t_accept = c->t_last = mono_s();
    c->addr = *addr;
    c->addr_len = alen;
    c->prev = g->tail;
    if (g->tail)
        g->tail->next = c;
    else
        g->head = c;
    g->tail = c;
    pthread_mutex_lock(&g->mu);
    g->n_wait++;
    pthread_mutex_unlock(&g->mu);
    /* Headers that came with the connection raise no later edge. */
    gconn_ready(g, c, 0, false);
}

static void set_listening(srv_gate *g, bool on)
{
    struct epoll_event ev = {on ? EPOLLIN : 0, {.ptr = &g->lfd}};
    epoll_ctl(g->ep, EPOLL_CTL_MOD, g->lfd, &ev);
    g->listening = on;
}

static void accept_some(srv_gate *g)
{
    for (int k = 0; k < ACCEPT_BATCH; k++) {
        struct sockaddr_storage a;
        socklen_t alen = sizeof a;
        int fd = accept4(g->lfd, (struct sockaddr *)&a, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            admit(g, fd, &a, alen);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            set_listening(g, false);
            g->resume_at = mono_s() + ACCEPT_PAUSE_S;
        }
        return;
    }
}

/* -------------------------------------------------------------- the clock */

/* Waiting connections: the deadlines, then a look at any new bytes. */
static void tick_waiting(srv_gate *g, double now)
{
    double idle = g->o.idle_timeout_s;
    for (gconn *c = g->head, *next; c; c = next) {
        next = c->next;
        if (now - c->t_accept > g->o.header_timeout_s || (idle > 0 && now - c->t_last > idle))
            drop_gconn(g, c, SRV_DROP_HEADER_TIMEOUT, 408, "Request Timeout",
                       "the request headers did not arrive in time");
        else
            gconn_ready(g, c, 0, true);
    }
}

/* The reason a slot misses its deadline now, or -1. */
static int slot_late(const srv_gate *g, const srv_slot *s, double now)
{
    double t = now - s->t_phase;
    if (s->phase == PH_HEADERS && t > g->o.header_timeout_s)
        return SRV_DROP_HEADER_TIMEOUT;
    if (s->phase != PH_BODY)
        return -1;
    if (t > g->o.body_timeout_s)
        return SRV_DROP_BODY_TIMEOUT;
    if (g->o.body_min_rate > 0 && t > 1 && (double)s->body_bytes < g->o.body_min_rate * (t - 1))
        return SRV_DROP_BODY_RATE;
    return -1;
}

typedef struct watched {
    srv_slot *slot;
    uint64_t id;
} watched;

/* Deadlines, then one poll over the watched slots' sockets. */
static void tick_slots(srv_gate *g, double now)
{
    struct pollfd *pf = NULL;
    watched *w = NULL;
    size_t n = 0;
    pthread_mutex_lock(&g->mu);
    size_t cap = (size_t)g->n_slots;
    if (cap) {
        pf = malloc(cap * sizeof *pf);
        w = malloc(cap * sizeof *w);
    }
    for (srv_slot *s = g->slots; s; s = s->next) {
        int why = slot_late(g, s, now);
        if (why >= 0) {
            shutdown(s->fd, SHUT_RDWR); /* libmicrohttpd reads the end and closes */
            s->phase = PH_DEAD;
            g->dropped[why]++;
        }
        if (s->gone && pf && n < cap) {
            pf[n] = (struct pollfd){s->fd, POLLRDHUP, 0};
            w[n++] = (watched){s, s->id};
        }
    }
    pthread_mutex_unlock(&g->mu);
    if (n && poll(pf, (nfds_t)n, 0) > 0) {
        pthread_mutex_lock(&g->mu);
        for (size_t i = 0; i < n; i++) {
            if (!(pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR)))
                continue;
            for (srv_slot *s = g->slots; s; s = s->next)
                if (s == w[i].slot && s->id == w[i].id && s->gone) {
                    void (*gone)(void *) = s->gone;
                    s->gone = NULL;
                    gone(s->gone_user);
                    break;
                }
        }
        pthread_mutex_unlock(&g->mu);
    }
    free(pf);
    free(w);
}

static void *gate_main(void *arg)
{
    srv_gate *g = arg;
    struct epoll_event ev[N_EVENTS];
    for (;;) {
        int n = epoll_wait(g->ep, ev, N_EVENTS, TICK_MS);
        bool listen_ready = false;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr == &g->stop_fd)
                return NULL;
            if (ev[i].data.ptr == &g->lfd)
                listen_ready = true;
            else
                gconn_ready(g, ev[i].data.ptr, ev[i].events, false);
        }
        /* After the batch: an eviction frees a connection the batch may name. */
        if (listen_ready)
            accept_some(g);
        double now = mono_s();
        if (!g->listening && now >= g->resume_at)
            set_listening(g, true);
        if (now - g->last_tick >= TICK_MS / 1000.0) {
            g->last_tick = now;
            tick_waiting(g, now);
            tick_slots(g, now);
        }
    }
}

/* ------------------------------------------------------------------ API */

static oct_status listen_on(srv_gate *g, const struct sockaddr *addr, socklen_t alen,
                            oct_error *err)
{
    g->lfd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (g->lfd < 0)
        return oct_error_set(err, OCT_ERR_IO, -1, "server: socket: %s", strerror(errno));
    int one = 1;
    setsockopt(g->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (addr->sa_family == AF_INET6)
        setsockopt(g->lfd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(g->lfd, addr, alen) != 0 || listen(g->lfd, SOMAXCONN) != 0)
        return oct_error_set(err, OCT_ERR_IO, -1, "server: cannot listen (%s)", strerror(errno));
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    getsockname(g->lfd, (struct sockaddr *)&got, &gl);
    g->port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)(void *)&got)->sin6_port
                                              : ((struct sockaddr_in *)(void *)&got)->sin_port);
    return OCT_OK;
}

oct_status srv_gate_create(const srv_gate_opts *o, const struct sockaddr *addr, socklen_t addr_len,
                           srv_gate **out, oct_error *err)
{
    *out = NULL;
    srv_gate *g = calloc(1, sizeof *g);
    if (!g)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    g->o = *o;
    g->lfd = g->ep = g->stop_fd = -1;
    pthread_mutex_init(&g->mu, NULL);
    oct_status st = OCT_OK;
    g->peek = malloc(o->max_header_bytes + 1);
    if (!g->peek) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        goto fail;
    }
    if ((st = listen_on(g, addr, addr_len, err)) != OCT_OK)
        goto fail;
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    g->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event le = {EPOLLIN, {.ptr = &g->lfd}}, se = {EPOLLIN, {.ptr = &g->stop_fd}};
    if (g->ep < 0 || g->stop_fd < 0 || epoll_ctl(g->ep, EPOLL_CTL_ADD, g->lfd, &le) != 0 ||
        epoll_ctl(g->ep, EPOLL_CTL_ADD, g->stop_fd, &se) != 0) {
        st = oct_error_set(err, OCT_ERR_IO, -1, "server: epoll: %s", strerror(errno));
        goto fail;
    }
    g->listening = true;
    if (pthread_create(&g->th, NULL, gate_main, g) != 0) {
        st = oct_error_set(err, OCT_ERR_IO, -1, "server: cannot start a thread");
        goto fail;
    }
    g->started = true;
    *out = g;
    return OCT_OK;
fail:
    srv_gate_free(g);
    return st;
}

int srv_gate_port(const srv_gate *g)
{
    return g->port;
}

void srv_gate_stop(srv_gate *g)
{
    if (!g || g->stopped)
        return;
    g->stopped = true;
    if (g->started) {
        uint64_t one = 1;
        if (write(g->stop_fd, &one, sizeof one) < 0)
            OCT_WARN("server: cannot wake the gate thread");
        pthread_join(g->th, NULL);
    }
    while (g->head)
        drop_gconn(g, g->head, NOT_COUNTED, 503, "Service Unavailable",
                   "the server is shutting down");
    if (g->lfd >= 0)
        close(g->lfd);
    g->lfd = -1;
}

void srv_gate_free(srv_gate *g)
{
    if (!g)
        return;
    srv_gate_stop(g);
    if (g->ep >= 0)
        close(g->ep);
    if (g->stop_fd >= 0)
        close(g->stop_fd);
    while (g->slots) { /* only when a slot was never closed */
        srv_slot *s = g->slots;
        g->slots = s->next;
        free(s);
    }
    free(g->peek);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

void srv_gate_get_stats(srv_gate *g, srv_gate_stats *st)
{
    pthread_mutex_lock(&g->mu);
    st->waiting = g->n_wait;
    st->handed = g->n_slots + g->n_passing;
    memcpy(st->dropped, g->dropped, sizeof st->dropped);
    pthread_mutex_unlock(&g->mu);
}

srv_slot *srv_gate_slot_open(srv_gate *g, int fd)
{
    srv_slot *s = calloc(1, sizeof *s);
    pthread_mutex_lock(&g->mu);
    if (g->n_passing > 0)
        g->n_passing--;
    if (s) {
        s->fd = fd;
        s->phase = PH_HEADERS;
        s->t_phase = mono_s();
        s->id = ++g->next_id;
        s->next = g->slots;
        if (g->slots)
            g->slots->prev = s;
        g->slots = s;
        g->n_slots++;
    }
    pthread_mutex_unlock(&g->mu);
    return s;
}

void srv_gate_slot_close(srv_gate *g, srv_slot *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&g->mu);
    if (s->prev)
        s->prev->next = s->next;
    else
        g->slots = s->next;
    if (s->next)
        s->next->prev = s->prev;
    g->n_slots--;
    pthread_mutex_unlock(&g->mu);
    free(s);
}

static void set_phase(srv_gate *g, srv_slot *s, slot_phase ph)
{
    if (!s)
        return;
    pthread_mutex_lock(&g->mu);
    if (s->phase != PH_DEAD) {
        s->phase = ph;
        s->t_phase = mono_s();
        s->body_bytes = 0;
    }
    pthread_mutex_unlock(&g->mu);
}

void srv_gate_slot_body(srv_gate *g, srv_slot *s)
{
    set_phase(g, s, PH_BODY);
}

void srv_gate_slot_work(srv_gate *g, srv_slot *s)
{
    set_phase(g, s, PH_WORK);
}

void srv_gate_slot_next(srv_gate *g, srv_slot *s)
{
    set_phase(g, s, PH_HEADERS);
}

void srv_gate_slot_bytes(srv_gate *g, srv_slot *s, size_t n)
{
    if (!s)
        return;
    pthread_mutex_lock(&g->mu);
    s->body_bytes += n;
    pthread_mutex_unlock(&g->mu);
}

void srv_gate_slot_watch(srv_gate *g, srv_slot *s, void (*gone)(void *user), void *user)
{
    if (!s)
        return;
    pthread_mutex_lock(&g->mu);
    s->gone = gone;
    s->gone_user = user;
    pthread_mutex_unlock(&g->mu);
}
