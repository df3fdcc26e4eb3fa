/* http.c — the HTTP front end (GNU libmicrohttpd, one thread per connection)
 * and the oct_server API.
 *
 * Each connection thread reads and validates its request, tokenizes, submits
 * the choices to the scheduler and then waits on the job: non-streaming
 * requests block in the access handler until every choice is done (so the
 * status code can still report an engine failure); streaming ones return a
 * callback response whose reader blocks for the next SSE events.  Both poll
 * the socket while waiting, so a client that hangs up cancels its
 * sequences within ~50 ms.
 *
 * Before any body byte is read, the request line and headers are checked:
 * framing (400), Host and Origin (403, guard.h), the endpoint (404), the API
 * key (401), Content-Length against the body limit (413), the method (405)
 * and Content-Type (415).  A response queued then makes libmicrohttpd skip
 * the body.
 *
 * Limits a client controls: header bytes (MHD's per-connection memory pool),
 * body bytes (413), JSON depth, n, max_tokens and prompt length (400),
 * concurrent connections and idle time (MHD options), queued sequences
 * (503). */
#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "core/core.h"
#include "engine/scheduler.h"
#include "server/guard.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/request.h"

#define WAIT_SLICE_MS 50
/* A chunked body past --max-body-bytes is read on (and dropped) up to this
 * many times the limit so that its 413 can be sent; beyond, the connection
 * is closed unanswered. */
#define DROP_FACTOR 4
/* Status recorded for a request whose client hung up first (nginx's). */
#define HTTP_CLIENT_CLOSED 499

struct oct_server {
    const oct_model *m;
    const oct_tokenizer *tok;
    oct_server_opts o;
    char model_name[256];
    int32_t eos[16];
    int n_eos;
    srv_limits lim;
    srv_hosts hosts;
    struct MHD_Daemon *d;
    int port;
    srv_metrics *metrics;

    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;  /* n_active changed */
    oct_sched *sched;   /* NULL once shut down */
    bool draining;
    int64_t n_active; /* live jobs */
    uint64_t serial;
    bool stopped;
};

typedef enum route { R_NONE, R_HEALTH, R_METRICS, R_MODELS, R_COMPLETIONS, R_CHAT } route;

typedef struct conn {
    oct_server *srv;
    route rt;
    char *body;
    size_t len, cap;
    size_t dropped; /* bytes of a chunked body over the limit read so far */
    bool too_large;
} conn;

typedef struct stream {
    oct_server *srv;
    struct MHD_Connection *mc;
    srv_job *job;
    uint64_t group;
    char *pend;
    size_t pend_len, pend_off;
    bool finished;
} stream;

/* ---------------------------------------------------------------- utils */

void oct_server_opts_default(oct_server_opts *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8000;
    o->max_num_seqs = 32;
    o->max_num_batched_tokens = 512;
    o->max_waiting = 1024;
    o->max_connections = 256;
    o->idle_timeout_s = 60;
    o->max_body_bytes = (size_t)4 << 20;
    o->max_header_bytes = (size_t)16 << 10;
    o->max_json_depth = 32;
    o->max_n = 16;
}

static double now_s(void)
{
    return oct_sched_now();
}

/* Compares in time that depends only on the expected key's length. */
static bool key_equal(const char *given, size_t glen, const char *key)
{
    size_t klen = strlen(key);
    volatile unsigned char diff = (unsigned char)(glen != klen);
    for (size_t i = 0; i < klen; i++) {
        unsigned char g = i < glen ? (unsigned char)given[i] : 0;
        diff |= (unsigned char)(g ^ (unsigned char)key[i]);
    }
    return diff == 0;
}

/* True once the peer closed or reset the connection. */
static bool client_gone(struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return false;
    struct pollfd p = {ci->connect_fd, POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0)
        return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

static void timed_wait(pthread_cond_t *cv, pthread_mutex_t *mu, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

static enum MHD_Result send_buf(struct MHD_Connection *mc, int status, const char *type, char *body,
                                size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    if (status == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ret = MHD_queue_response(mc, (unsigned int)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *mc, int status, char *body)
{
    if (!body)
        return MHD_NO;
    return send_buf(mc, status, "application/json", body, strlen(body));
}

static enum MHD_Result send_error(oct_server *s, struct MHD_Connection *mc, const srv_error *e)
{
    srv_metrics_request(s->metrics, e->http, 0, 0);
    return send_json(mc, e->http, srv_error_body(e));
}

static enum MHD_Result fail(oct_server *s, struct MHD_Connection *mc, int http, const char *type,
                            const char *param, const char *msg)
{
    srv_error e;
    srv_error_set(&e, http, type, param, "%s", msg);
    return send_error(s, mc, &e);
}

/* --------------------------------------------------------- job lifetime */

static void job_freed(void *user)
{
    oct_server *s = user;
    pthread_mutex_lock(&s->mu);
    s->n_active--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void cancel_group(oct_server *s, uint64_t group)
{
    pthread_mutex_lock(&s->mu);
    if (s->sched)
        oct_sched_cancel(s->sched, group);
    pthread_mutex_unlock(&s->mu);
}

static void obs_ttft(void *user, double sec)
{
    srv_metrics_ttft(user, sec);
}

static void obs_itl(void *user, double sec)
{
    srv_metrics_itl(user, sec);
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ------------------------------------------------------------ streaming */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream *st = cls;
    for (;;) {
        if (st->pend_off < st->pend_len) {
            size_t n = OCT_MIN(max, st->pend_len - st->pend_off);
            memcpy(buf, st->pend + st->pend_off, n);
            st->pend_off += n;
            return (ssize_t)n;
        }
        if (st->finished)
            return MHD_CONTENT_READER_END_OF_STREAM;
        free(st->pend);
        st->pend = NULL;
        st->pend_len = st->pend_off = 0;
        srv_job *j = st->job;
        pthread_mutex_lock(&j->mu);
        for (;;) {
            st->finished = srv_job_stream(j, &st->pend, &st->pend_len);
            if (st->finished || st->pend_len)
                break;
            timed_wait(&j->cv, &j->mu, WAIT_SLICE_MS);
            if (client_gone(st->mc)) {
                pthread_mutex_unlock(&j->mu);
                return MHD_CONTENT_READER_END_WITH_ERROR; /* free callback cancels */
            }
        }
        pthread_mutex_unlock(&j->mu);
    }
}

static void stream_free(void *cls)
{
    stream *st = cls;
    srv_job *j = st->job;
    pthread_mutex_lock(&j->mu);
    bool all_done = j->n_done == j->n_choices;
    int http = j->error[0] ? 500 : st->finished ? 200 : HTTP_CLIENT_CLOSED;
    int64_t gen = srv_job_completion_tokens(j);
    pthread_mutex_unlock(&j->mu);
    if (!all_done)
        cancel_group(st->srv, st->group);
    srv_metrics_request(st->srv->metrics, http, j->n_prompt, gen);
    srv_job_unref(j);
    free(st->pend);
    free(st);
}

/* ---------------------------------------------------------- generation */

/* The prompt as token ids, with generate's encoding rules. */
static bool encode_prompt(oct_server *s, srv_kind kind, srv_request *req, oct_token_ids *ids,
                          srv_error *e)
{
    oct_error err;
    oct_error_clear(&err);
    if (kind == SRV_CHAT) {
        char *text = NULL;
        size_t tl = 0;
        bool ok = oct_chat_render_json(s->tok, NULL, req->messages_json, NULL, true, &text, &tl,
                                       &err) == OCT_OK &&
                  oct_tokenizer_encode(s->tok, text, tl, false, ids, &err) == OCT_OK;
        oct_tokenizer_text_free(text);
        if (!ok)
            srv_error_set(e, 400, "invalid_request_error", "messages", "%s", err.message);
        return ok;
    }
    if (req->prompt) {
        if (oct_tokenizer_encode(s->tok, req->prompt, req->prompt_len, true, ids, &err) == OCT_OK)
            return true;
        srv_error_set(e, 400, "invalid_request_error", "prompt", "%s", err.message);
        return false;
    }
    ids->ids = req->prompt_ids;
    ids->n = ids->cap = req->n_prompt_ids;
    req->prompt_ids = NULL;
    return true;
}

/* The prompt's ids and length against the model, and max_tokens's default. */
static bool check_prompt(const oct_server *s, srv_kind kind, srv_request *req,
                         const oct_token_ids *ids, srv_error *e)
{
    const char *pparam = kind == SRV_CHAT ? "messages" : "prompt";
    int64_t V = oct_model_vocab_size(s->m), mml = s->o.max_model_len;
    if (ids->n == 0) {
        srv_error_set(e, 400, "invalid_request_error", pparam, "the prompt encodes to no tokens");
        return false;
    }
    for (int64_t i = 0; i < ids->n; i++)
        if (ids->ids[i] >= V) {
            srv_error_set(e, 400, "invalid_request_error", pparam,
                          "prompt token id %d is outside the vocabulary (%lld)", ids->ids[i],
                          (long long)V);
            return false;
        }
    if (ids->n >= mml) {
        srv_error_set(e, 400, "invalid_request_error", pparam,
                      "This model's maximum context length is %lld tokens. However, your "
                      "prompt has %lld tokens.",
                      (long long)mml, (long long)ids->n);
        return false;
    }
    if (req->max_tokens >= 0 && ids->n + req->max_tokens > mml) {
        srv_error_set(e, 400, "invalid_request_error", "max_tokens",
                      "This model's maximum context length is %lld tokens. However, you "
                      "requested %lld tokens (%lld in the prompt, %lld for the completion).",
                      (long long)mml, (long long)(ids->n + req->max_tokens), (long long)ids->n,
                      (long long)req->max_tokens);
        return false;
    }
    if (req->max_tokens < 0) /* OpenAI's completions default is 16; chat: up to the limit */
        req->max_tokens = kind == SRV_COMPLETIONS ? OCT_MIN(16, mml - ids->n) : mml - ids->n;
    return true;
}

/* A job that owns *req (emptied) and a copy of the ids; NULL with *e set.
 * Its serial is the request's sequence group. */
static srv_job *new_job(oct_server *s, srv_request *req, const oct_token_ids *ids,
                        uint64_t *serial_out, srv_error *e)
{
    pthread_mutex_lock(&s->mu);
    uint64_t serial = *serial_out = ++s->serial;
    pthread_mutex_unlock(&s->mu);
    int32_t *pid = oct_malloc((size_t)ids->n * sizeof(int32_t));
    srv_job *j = NULL;
    if (pid) {
        memcpy(pid, ids->ids, (size_t)ids->n * sizeof(int32_t));
        j = srv_job_new(req, s->tok, s->model_name, pid, ids->n, serial);
    }
    if (!j) {
        srv_error_set(e, 500, "server_error", "", "out of memory");
        return NULL;
    }
    j->on_free = job_freed;
    j->on_free_user = s;
    return j;
}

/* Submits every choice of j as one group (s->mu held); on a failure the
 * *n_submitted ones already submitted are cancelled. */
static oct_status submit_choices(oct_server *s, srv_job *j, uint64_t group, int *n_submitted,
                                 oct_error *err)
{
    uint64_t seed0 =
        j->req.seed_set ? j->req.sampling.seed : mix64((uint64_t)(now_s() * 1e9) ^ (group << 20));
    oct_status st = OCT_OK;
    int submitted = 0;
    for (int i = 0; i < j->n_choices && st == OCT_OK; i++) {
        oct_sched_params p;
        memset(&p, 0, sizeof p);
        p.prompt = j->prompt_ids;
        p.n_prompt = j->n_prompt;
        p.max_tokens = j->req.max_tokens;
        p.sampling = j->req.sampling;
        p.sampling.seed = seed0 + (uint64_t)i;
        p.logprobs = j->req.logprobs;
        p.prompt_logprobs = i == 0 && j->plp != NULL;
        p.ignore_eos = j->req.ignore_eos;
        p.group = group;
        p.t_arrival = now_s();
        p.on_token = srv_job_on_token;
        p.on_done = srv_job_on_done;
        p.on_prompt = srv_job_on_prompt;
        p.user = &j->ch[i];
        srv_job_ref(j); /* dropped by on_done */
        st = oct_sched_submit(s->sched, &p, err);
        if (st != OCT_OK)
            srv_job_unref(j);
        else
            submitted++;
    }
    if (st != OCT_OK && submitted)
        oct_sched_cancel(s->sched, group);
    *n_submitted = submitted;
    return st;
}

/* Hands j to the engine; false with *e set (the answer) when the engine
 * refused it, once the choices already submitted are cancelled. */
static bool submit_job(oct_server *s, srv_job *j, uint64_t group, srv_error *e)
{
    oct_error err;
    oct_error_clear(&err);
    int submitted = 0;
    pthread_mutex_lock(&s->mu);
    s->n_active++;
    oct_status st = OCT_ERR_UNSUPPORTED;
    if (!s->draining && s->sched)
        st = submit_choices(s, j, group, &submitted, &err);
    pthread_mutex_unlock(&s->mu);
    if (st == OCT_OK)
        return true;
    pthread_mutex_lock(&j->mu);
    while (j->n_done < submitted)
        timed_wait(&j->cv, &j->mu, WAIT_SLICE_MS);
    pthread_mutex_unlock(&j->mu);
    int http = st == OCT_ERR_UNSUPPORTED   ? 503
               : st == OCT_ERR_INVALID_ARG ? 400
               : st == OCT_ERR_NOMEM       ? 500
                                           : 503;
    srv_error_set(e, http, http == 400 ? "invalid_request_error" : "server_error", "", "%s",
                  st == OCT_ERR_UNSUPPORTED ? "the server is shutting down" : err.message);
    return false;
}

static enum MHD_Result stream_response(oct_server *s, struct MHD_Connection *mc, srv_job *j,
                                       uint64_t group)
{
    stream *sm = calloc(1, sizeof *sm);
    struct MHD_Response *r =
        sm ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, sm, stream_free)
           : NULL;
    if (!r) {
        free(sm);
        cancel_group(s, group);
        srv_job_unref(j);
        return MHD_NO;
    }
    sm->srv = s;
    sm->mc = mc;
    sm->job = j;
    sm->group = group;
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(mc, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* Blocks until every choice is done (cancelling them when the client hangs
 * up), then answers. */
static enum MHD_Result wait_answer(oct_server *s, struct MHD_Connection *mc, srv_job *j,
                                   uint64_t group)
{
    pthread_mutex_lock(&j->mu);
    bool cancelled = false;
    while (j->n_done < j->n_choices) {
        timed_wait(&j->cv, &j->mu, WAIT_SLICE_MS);
        if (!cancelled && client_gone(mc)) {
            cancelled = true;
            pthread_mutex_unlock(&j->mu);
            cancel_group(s, group);
            pthread_mutex_lock(&j->mu);
        }
    }
    srv_error e;
    char *body = NULL;
    int http = 200;
    bool aborted = false;
    for (int i = 0; i < j->n_choices; i++)
        aborted |= j->ch[i].reason == OCT_FINISH_CANCELLED;
    if (j->error[0]) {
        srv_error_set(&e, 500, "server_error", "", "%s", j->error);
        http = 500;
        body = srv_error_body(&e);
    } else if (aborted) {
        srv_error_set(&e, 503, "server_error", "", "the request was cancelled");
        http = 503;
        body = srv_error_body(&e);
    } else {
        body = srv_job_body(j);
    }
    int64_t gen = srv_job_completion_tokens(j);
    pthread_mutex_unlock(&j->mu);
    srv_metrics_request(s->metrics, cancelled ? HTTP_CLIENT_CLOSED : http, j->n_prompt, gen);
    srv_job_unref(j);
    return send_json(mc, http, body);
}

/* The body is complete: parse, tokenize, check, submit; then stream or
 * wait for the answer. */
static enum MHD_Result generate(oct_server *s, struct MHD_Connection *mc, srv_kind kind,
                                const conn *c)
{
    srv_request req;
    srv_error e;
    if (!srv_request_parse(c->body ? c->body : "", c->len, kind, &s->lim, &req, &e))
        return send_error(s, mc, &e);
    oct_token_ids ids = {0};
    bool ok = true;
    if (req.model && strcmp(req.model, s->model_name) != 0) {
        srv_error_set(&e, 404, "NotFoundError", "model", "The model `%s` does not exist.",
                      req.model);
        ok = false;
    }
    ok = ok && encode_prompt(s, kind, &req, &ids, &e) && check_prompt(s, kind, &req, &ids, &e);
    uint64_t group = 0;
    srv_job *j = ok ? new_job(s, &req, &ids, &group, &e) : NULL;
    oct_token_ids_free(&ids);
    srv_request_free(&req);
    if (!j)
        return send_error(s, mc, &e);
    if (!submit_job(s, j, group, &e)) {
        srv_job_unref(j);
        return send_error(s, mc, &e);
    }
    return j->req.stream ? stream_response(s, mc, j, group) : wait_answer(s, mc, j, group);
}

/* ------------------------------------------------------------- routing */

static enum MHD_Result models(oct_server *s, struct MHD_Connection *mc)
{
    json_t *o = json_object(), *arr = json_array(), *m = json_object();
    json_object_set_new(m, "id", json_string(s->model_name));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer((json_int_t)time(NULL)));
    json_object_set_new(m, "owned_by", json_string("octet"));
    json_object_set_new(m, "root", json_string(s->model_name));
    json_object_set_new(m, "max_model_len", json_integer(s->o.max_model_len));
    json_array_append_new(arr, m);
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", arr);
    char *b = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    srv_metrics_request(s->metrics, 200, 0, 0);
    return send_json(mc, 200, b);
}

static enum MHD_Result metrics(oct_server *s, struct MHD_Connection *mc)
{
    oct_sched_stats st;
    memset(&st, 0, sizeof st);
    pthread_mutex_lock(&s->mu);
    if (s->sched)
        oct_sched_get_stats(s->sched, &st);
    pthread_mutex_unlock(&s->mu);
    size_t len = 0;
    char *t = srv_metrics_render(s->metrics, &st, s->model_name, &len);
    if (!t)
        return MHD_NO;
    /* MHD frees with free(); the text came from oct_malloc. */
    char *b = malloc(len + 1);
    if (b)
        memcpy(b, t, len + 1);
    oct_free(t);
    if (!b)
        return MHD_NO;
    return send_buf(mc, 200, "text/plain; version=0.0.4; charset=utf-8", b, len);
}

static bool authorized(const oct_server *s, struct MHD_Connection *mc)
{
    if (!s->o.api_key || !s->o.api_key[0])
        return true;
    const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    while (*h == ' ')
        h++;
    return key_equal(h, strlen(h), s->o.api_key);
}

static route route_of(const char *url, const char *method)
{
    bool get = strcmp(method, "GET") == 0;
    if (strcmp(url, "/health") == 0)
        return get ? R_HEALTH : R_NONE;
    if (strcmp(url, "/metrics") == 0)
        return get ? R_METRICS : R_NONE;
    if (strcmp(url, "/v1/models") == 0)
        return R_MODELS;
    if (strcmp(url, "/v1/completions") == 0)
        return R_COMPLETIONS;
    if (strcmp(url, "/v1/chat/completions") == 0)
        return R_CHAT;
    return R_NONE;
}

/* Content-Length headers seen; a request with differing ones, or with one
 * beside Transfer-Encoding, has no agreed end (RFC 9112 6.3: it is how
 * requests are smuggled past a proxy) and is refused. */
typedef struct framing {
    const char *length; /* the first Content-Length, NULL when none */
    bool conflict, chunked;
} framing;

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    (void)kind;
    framing *f = cls;
    if (strcasecmp(key, "Transfer-Encoding") == 0)
        f->chunked = true;
    if (strcasecmp(key, "Content-Length") != 0)
        return MHD_YES;
    value = value ? value : "";
    if (f->length && strcmp(f->length, value) != 0)
        f->conflict = true;
    if (!f->length)
        f->length = value;
    return MHD_YES;
}

static const char *header(struct MHD_Connection *mc, const char *name)
{
    return MHD_lookup_connection_value(mc, MHD_HEADER_KIND, name);
}

/* Framing and the Host / Origin guard: false with *e set when refused. */
static bool check_headers(const oct_server *s, struct MHD_Connection *mc, framing *f, srv_error *e)
{
    MHD_get_connection_values(mc, MHD_HEADER_KIND, framing_header, f);
    if (f->conflict || (f->length && f->chunked)) {
        srv_error_set(e, 400, "invalid_request_error", "",
                      f->conflict ? "differing Content-Length headers"
                                  : "both Content-Length and Transfer-Encoding");
        return false;
    }
    const char *host = header(mc, "Host"), *origin = header(mc, "Origin");
    if (!srv_host_allowed(&s->hosts, host)) {
        srv_error_set(e, 403, "invalid_request_error", "",
                      "Host '%.100s' is not allowed (see --allowed-hosts)", host);
        return false;
    }
    if (!srv_origin_allowed(&s->hosts, origin)) {
        srv_error_set(e, 403, "invalid_request_error", "",
                      "Origin '%.100s' is not allowed (see --allowed-hosts)", origin);
        return false;
    }
    return true;
}

/* Everything decided from the request line and the headers, before any
 * body byte is read: false with *e set when the request is refused. */
static bool precheck(const oct_server *s, struct MHD_Connection *mc, route rt, const char *method,
                     srv_error *e)
{
    framing f = {NULL, false, false};
    if (!check_headers(s, mc, &f, e))
        return false;
    if (rt == R_NONE) {
        srv_error_set(e, 404, "NotFoundError", "", "no such endpoint");
        return false;
    }
    if (rt >= R_MODELS && !authorized(s, mc)) {
        srv_error_set(e, 401, "invalid_request_error", "", "invalid or missing API key");
        return false;
    }
    if (f.length && strtoull(f.length, NULL, 10) > s->o.max_body_bytes) {
        srv_error_set(e, 413, "invalid_request_error", "",
                      "the request body is larger than %zu bytes", s->o.max_body_bytes);
        return false;
    }
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    if ((rt == R_MODELS && !get) || (rt >= R_COMPLETIONS && !post)) {
        srv_error_set(e, 405, "invalid_request_error", "", "%s",
                      rt == R_MODELS ? "use GET /v1/models" : "use POST");
        return false;
    }
    if (rt >= R_COMPLETIONS && !srv_is_json_type(header(mc, "Content-Type"))) {
        srv_error_set(e, 415, "invalid_request_error", "", "Content-Type must be application/json");
        return false;
    }
    return true;
}

/* First call for a request: headers only.  A response queued now makes
 * libmicrohttpd skip the body and close the connection. */
static enum MHD_Result begin(oct_server *s, struct MHD_Connection *mc, const char *url,
                             const char *method, void **con_cls)
{
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return MHD_NO;
    c->srv = s;
    c->rt = route_of(url, method);
    *con_cls = c;
    srv_error e;
    if (!precheck(s, mc, c->rt, method, &e))
        return send_error(s, mc, &e);
    return MHD_YES;
}

static size_t drop_limit(const oct_server *s)
{
    size_t m = s->o.max_body_bytes;
    return m > SIZE_MAX / DROP_FACTOR ? SIZE_MAX : m * DROP_FACTOR;
}

/* Appends an upload piece.  A body with a Content-Length over the limit
 * never gets here (precheck); a chunked one is dropped once past it, and
 * libmicrohttpd can only answer after the body's end. */
static enum MHD_Result take_body(oct_server *s, conn *c, const char *upload, size_t *upload_size)
{
    size_t n = *upload_size;
    *upload_size = 0;
    if (!c->too_large && c->len + n > s->o.max_body_bytes) {
        c->too_large = true;
        c->dropped = c->len;
        free(c->body);
        c->body = NULL;
        c->len = c->cap = 0;
    }
    if (c->too_large) {
        c->dropped += n;
        return c->dropped <= drop_limit(s) ? MHD_YES : MHD_NO;
    }
    size_t need = c->len + n;
    if (need + 1 > c->cap) {
        size_t cap = OCT_MIN(OCT_MAX(need + 1, c->cap * 2), s->o.max_body_bytes + 1);
        char *b = realloc(c->body, cap);
        if (!b)
            return MHD_NO;
        c->body = b;
        c->cap = cap;
    }
    memcpy(c->body + c->len, upload, n);
    c->len = need;
    c->body[c->len] = 0;
    return MHD_YES;
}

static enum MHD_Result health(oct_server *s, struct MHD_Connection *mc)
{
    pthread_mutex_lock(&s->mu);
    bool draining = s->draining;
    pthread_mutex_unlock(&s->mu);
    if (draining)
        return fail(s, mc, 503, "server_error", "", "the server is shutting down");
    char *b = strdup("{\"status\":\"ok\"}");
    return b ? send_json(mc, 200, b) : MHD_NO;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *mc, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    (void)version;
    oct_server *s = cls;
    conn *c = *con_cls;
    if (!c)
        return begin(s, mc, url, method, con_cls);
    if (*upload_size)
        return take_body(s, c, upload, upload_size);
    if (c->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", s->o.max_body_bytes);
        return fail(s, mc, 413, "invalid_request_error", "", msg);
    }
    switch (c->rt) {
    case R_HEALTH: return health(s, mc);
    case R_METRICS: return metrics(s, mc);
    case R_MODELS: return models(s, mc);
    case R_COMPLETIONS: return generate(s, mc, SRV_COMPLETIONS, c);
    case R_CHAT: return generate(s, mc, SRV_CHAT, c);
    default: return MHD_NO; /* refused in begin */
    }
}

static void completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)mc;
    (void)toe;
    conn *c = *con_cls;
    if (c) {
        free(c->body);
        free(c);
        *con_cls = NULL;
    }
}

/* ------------------------------------------------------------------ API */

static bool is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)(const void *)sa;
        return (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127);
    }
    return false;
}

/* The Host / Origin guard from opts.allowed_hosts (`serve --allowed-hosts`),
 * else $OCTET_ALLOWED_HOSTS. */
static oct_status hosts_init(oct_server *s, const struct sockaddr *bound, oct_error *err)
{
    const char *spec = s->o.allowed_hosts ? s->o.allowed_hosts : getenv("OCTET_ALLOWED_HOSTS");
    if (srv_hosts_init(&s->hosts, spec, is_loopback(bound)))
        return OCT_OK;
    return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                         "server: bad allowed hosts '%s' (names separated by commas, or *)", spec);
}

oct_status oct_server_create(const oct_model *m, const oct_tokenizer *tok, const char *model_dir,
                             const oct_server_opts *opts, oct_server **out, oct_error *err)
{
    *out = NULL;
    if (!m || !tok || !opts)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_server_create: bad arguments");
    oct_server *s = oct_calloc(1, sizeof *s);
    if (!s)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    s->m = m;
    s->tok = tok;
    s->o = *opts;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    oct_status st = OCT_OK;
    const oct_model_config *cfg = oct_model_get_config(m);
    const char *name = opts->served_model_name ? opts->served_model_name
                       : model_dir             ? model_dir
                                               : "octet";
    snprintf(s->model_name, sizeof s->model_name, "%s", name);
    /* Stop ids as vLLM's: the tokenizer's eos plus config.json's and
     * generation_config.json's eos_token_id. */
    s->n_eos = oct_model_config_eos_ids(cfg, s->eos, 15);
    int32_t tok_eos = oct_tokenizer_eos_id(tok);
    bool have = false;
    for (int i = 0; i < s->n_eos; i++)
        have |= s->eos[i] == tok_eos;
    if (tok_eos >= 0 && !have)
        s->eos[s->n_eos++] = tok_eos;
    if ((st = oct_model_config_max_len(cfg, s->o.max_model_len, &s->o.max_model_len, err)) !=
        OCT_OK)
        goto fail;
    if (s->o.max_model_len < 2 || s->o.max_num_seqs <= 0 || s->o.max_connections <= 0 ||
        s->o.idle_timeout_s < 0 || s->o.max_body_bytes == 0 || s->o.max_json_depth <= 0 ||
        s->o.max_n <= 0) {
        st = oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "server: bad limits");
        goto fail;
    }
    s->lim.max_depth = s->o.max_json_depth;
    s->lim.max_n = s->o.max_n;
    s->lim.max_tokens = s->o.max_model_len;
    s->lim.max_prompt_ids = s->o.max_model_len;
    if (!(s->metrics = srv_metrics_new())) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        goto fail;
    }
    oct_sched_opts so;
    memset(&so, 0, sizeof so);
    so.max_num_seqs = s->o.max_num_seqs;
    so.max_model_len = s->o.max_model_len;
    so.max_num_batched_tokens = s->o.max_num_batched_tokens > 0 ? s->o.max_num_batched_tokens : 512;
    so.kv_blocks = s->o.kv_cache_tokens > 0 ? oct_ceil_div(s->o.kv_cache_tokens, 16) : 0;
    so.max_waiting = s->o.max_waiting;
    so.eos_ids = s->eos;
    so.n_eos = s->n_eos;
    so.on_ttft = obs_ttft;
    so.on_itl = obs_itl;
    so.observer_user = s->metrics;
    if ((st = oct_sched_create(m, &so, &s->sched, err)) != OCT_OK)
        goto fail;

    /* Address to bind. */
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", s->o.port);
    const char *host = s->o.host && s->o.host[0] ? s->o.host : "127.0.0.1";
    int gr = getaddrinfo(host, port, &hints, &ai);
    if (gr != 0 || !ai) {
        st = oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "server: cannot resolve --host '%s': %s",
                           host, gai_strerror(gr));
        goto fail;
    }
    if ((st = hosts_init(s, ai->ai_addr, err)) != OCT_OK) {
        freeaddrinfo(ai);
        goto fail;
    }
    unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* The per-connection pool holds the request line, headers and the I/O
     * buffers; exhausting it with headers gets a 431 from MHD. */
    size_t pool = s->o.max_header_bytes + 8192;
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned int)s->o.max_connections,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)s->o.idle_timeout_s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool, MHD_OPTION_NOTIFY_COMPLETED,
                            completed, s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        st = oct_error_set(err, OCT_ERR_IO, -1, "server: cannot listen on %s:%d (in use?)", host,
                           s->o.port);
        goto fail;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? (int)di->port : s->o.port;
    *out = s;
    return OCT_OK;
fail:
    oct_server_free(s);
    return st;
}

int oct_server_port(const oct_server *s)
{
    return s ? s->port : -1;
}

void oct_server_shutdown(oct_server *s, double grace_s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->stopped) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->draining = true;
    double deadline = now_s() + grace_s;
    while (s->n_active > 0 && now_s() < deadline)
        timed_wait(&s->cv, &s->mu, WAIT_SLICE_MS);
    oct_sched *sched = s->sched;
    s->sched = NULL;
    s->stopped = true;
    int64_t left = s->n_active;
    pthread_mutex_unlock(&s->mu);
    if (left)
        OCT_INFO("server: cancelling %lld unfinished requests", (long long)left);
    oct_sched_free(sched); /* every remaining sequence ends (cancelled) */
    if (s->d)
        MHD_stop_daemon(s->d); /* joins the connection threads */
    s->d = NULL;
}

void oct_server_free(oct_server *s)
{
    if (!s)
        return;
    oct_server_shutdown(s, 0);
    oct_sched_free(s->sched);
    srv_metrics_free(s->metrics);
    srv_hosts_free(&s->hosts);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    oct_free(s);
}
