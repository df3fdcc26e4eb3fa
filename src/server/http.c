/* http.c — the HTTP front end (GNU libmicrohttpd) and the oct_server API.
 *
 * The gate (gate.h) accepts every connection and holds it until its
 * headers are complete; then it goes to one of N_DAEMONS libmicrohttpd
 * daemons, each one epoll thread that never blocks: a generation request
 * is validated, tokenized and submitted to the scheduler, and its
 * connection is suspended whenever it has to wait for the engine.  A
 * non-streaming request waits for every choice (so the status code can
 * still report an engine failure); a streaming one returns a callback
 * response whose reader hands out the SSE events that are ready and
 * suspends when there are none.  The job's next change resumes the
 * connection (job.h); the gate watches the socket meanwhile, so a client
 * that hangs up cancels its sequences within ~50 ms.  Every response
 * closes its connection: each request's headers pass the gate.
 *
 * Before any body byte is read, the request line and headers are checked:
 * framing (400), Host and Origin (403, guard.h), the endpoint (404), the API
 * key (401), Content-Length against the body limit (413), the method (405)
 * and Content-Type (415).  A response queued then makes libmicrohttpd skip
 * the body.
 *
 * Limits a client controls: header bytes (431) and time, body bytes (413),
 * time and rate (gate.h), JSON depth, n, max_tokens and prompt length (400),
 * concurrent connections, idle time (MHD's timeout: a client that stops
 * reading its response), queued sequences (503). */
#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "core/core.h"
#include "engine/scheduler.h"
#include "server/gate.h"
#include "server/guard.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/request.h"

#define WAIT_SLICE_MS 50
/* libmicrohttpd daemons (one epoll thread each) the gate deals connections to. */
#define N_DAEMONS 4
/* At shutdown, after the engine stopped: time for the last answers to go out. */
#define FLUSH_S 2.0
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
    srv_gate *gate;
    struct MHD_Daemon *d[N_DAEMONS];
    unsigned next_d; /* gate thread only */
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

/* One request (libmicrohttpd's per-request pointer). */
typedef struct conn {
    oct_server *srv;
    srv_slot *slot; /* the gate's record of the connection */
    route rt;
    char *body;
    size_t len, cap;
    size_t dropped; /* bytes of a chunked body over the limit read so far */
    bool too_large, body_done;
    srv_job *job; /* one reference, from submission to the request's end */
    uint64_t group;
    bool streaming, answered, cancelled;
} conn;

typedef struct stream {
    oct_server *srv;
    struct MHD_Connection *mc;
    srv_job *job; /* one reference */
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
    o->request_header_timeout_s = 10;
    o->request_body_timeout_s = 60;
    o->request_body_min_rate = 1024;
    o->enable_prefix_caching = true;
    o->gpu_memory_utilization = 0.9;
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
    MHD_add_response_header(r, "Connection", "close");
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

/* ------------------------------------------------------------- waiting */

/* Called by the job with its mutex held: the connection parked on it. */
static void resume_conn(void *user)
{
    MHD_resume_connection(user);
}

/* From the access handler or the content reader, with j->mu held: the
 * connection sleeps until the job's next change (or the client's hang-up). */
static void park(srv_job *j, struct MHD_Connection *mc)
{
    MHD_suspend_connection(mc);
    j->waiting = true;
}

/* From the gate thread: the client of a job's connection hung up. */
static void conn_gone(void *user)
{
    srv_job *j = user;
    pthread_mutex_lock(&j->mu);
    j->gone = true;
    srv_job_wake(j);
    pthread_mutex_unlock(&j->mu);
}

/* ------------------------------------------------------------ streaming */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream *st = cls;
    if (st->pend_off == st->pend_len) {
        if (st->finished)
            return MHD_CONTENT_READER_END_OF_STREAM;
        free(st->pend);
        st->pend = NULL;
        st->pend_len = st->pend_off = 0;
        srv_job *j = st->job;
        pthread_mutex_lock(&j->mu);
        if (j->gone) {
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR; /* the free callback cancels */
        }
        st->finished = srv_job_stream(j, &st->pend, &st->pend_len);
        if (!st->finished && !st->pend_len) {
            park(j, st->mc);
            pthread_mutex_unlock(&j->mu);
            return 0; /* called again once resumed */
        }
        pthread_mutex_unlock(&j->mu);
        if (!st->pend_len)
            return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = OCT_MIN(max, st->pend_len - st->pend_off);
    memcpy(buf, st->pend + st->pend_off, n);
    st->pend_off += n;
    return (ssize_t)n;
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

static enum MHD_Result start_stream(oct_server *s, struct MHD_Connection *mc, conn *c)
{
    stream *sm = calloc(1, sizeof *sm);
    struct MHD_Response *r =
        sm ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, sm, stream_free)
           : NULL;
    if (!r) {
        free(sm);
        return MHD_NO; /* completed() cancels */
    }
    sm->srv = s;
    sm->mc = mc;
    sm->job = c->job;
    sm->group = c->group;
    srv_job_ref(c->job);
    c->streaming = true;
    /* What is ready now (chat's role chunk) goes out before the first token. */
    pthread_mutex_lock(&c->job->mu);
    sm->finished = srv_job_stream(c->job, &sm->pend, &sm->pend_len);
    pthread_mutex_unlock(&c->job->mu);
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(mc, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* ------------------------------------------------------ non-streaming */

/* The answer once every choice is done; parks the connection before. */
static enum MHD_Result answer(oct_server *s, struct MHD_Connection *mc, conn *c)
{
    srv_job *j = c->job;
    pthread_mutex_lock(&j->mu);
    if (j->gone && !c->cancelled) {
        c->cancelled = true;
        pthread_mutex_unlock(&j->mu);
        cancel_group(s, c->group);
        pthread_mutex_lock(&j->mu);
    }
    if (j->n_done < j->n_choices) {
        park(j, mc);
        pthread_mutex_unlock(&j->mu);
        return MHD_YES;
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
    c->answered = true;
    srv_metrics_request(s->metrics, c->cancelled ? HTTP_CLIENT_CLOSED : http, j->n_prompt, gen);
    if (c->cancelled) {
        free(body);
        return MHD_NO; /* nobody to answer */
    }
    return send_json(mc, http, body);
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
 * ones already submitted are cancelled. */
static oct_status submit_choices(oct_server *s, srv_job *j, uint64_t group, oct_error *err)
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
    return st;
}

/* Hands j to the engine: c owns it from here; false with *e set (the
 * answer) when the engine refused it. */
static bool start_job(oct_server *s, struct MHD_Connection *mc, conn *c, srv_job *j, uint64_t group,
                      srv_error *e)
{
    oct_error err;
    oct_error_clear(&err);
    pthread_mutex_lock(&j->mu);
    j->wake = resume_conn;
    j->wake_user = mc;
    pthread_mutex_unlock(&j->mu);
    c->job = j;
    c->group = group;
    pthread_mutex_lock(&s->mu);
    s->n_active++;
    oct_status st = OCT_ERR_UNSUPPORTED;
    if (!s->draining && s->sched)
        st = submit_choices(s, j, c->group, &err);
    pthread_mutex_unlock(&s->mu);
    if (st == OCT_OK) {
        srv_gate_slot_watch(s->gate, c->slot, conn_gone, j);
        return true;
    }
    c->answered = true;
    int http = st == OCT_ERR_UNSUPPORTED   ? 503
               : st == OCT_ERR_INVALID_ARG ? 400
               : st == OCT_ERR_NOMEM       ? 500
                                           : 503;
    srv_error_set(e, http, http == 400 ? "invalid_request_error" : "server_error", "", "%s",
                  st == OCT_ERR_UNSUPPORTED ? "the server is shutting down" : err.message);
    return false;
}

/* The body is complete: parse, tokenize, check, submit; then stream or
 * wait for the answer. */
static enum MHD_Result generate(oct_server *s, struct MHD_Connection *mc, srv_kind kind, conn *c)
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
    bool stream_mode = j->req.stream;
    if (!start_job(s, mc, c, j, group, &e))
        return send_error(s, mc, &e);
    return stream_mode ? start_stream(s, mc, c) : answer(s, mc, c);
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
    srv_gate_stats gs;
    memset(&gs, 0, sizeof gs);
    if (s->gate)
        srv_gate_get_stats(s->gate, &gs);
    size_t len = 0;
    char *t = srv_metrics_render(s->metrics, &st, &gs, s->model_name, &len);
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
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    c->slot = ci ? ci->socket_context : NULL;
    srv_gate_slot_body(s->gate, c->slot);
    *con_cls = c;
    srv_error e;
    if (!precheck(s, mc, c->rt, method, &e)) {
        srv_gate_slot_work(s->gate, c->slot); /* answered now; the body is skipped */
        return send_error(s, mc, &e);
    }
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
    srv_gate_slot_bytes(s->gate, c->slot, n);
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
    if (c->job) /* resumed: the job changed */
        return answer(s, mc, c);
    if (!c->body_done) {
        c->body_done = true;
        srv_gate_slot_work(s->gate, c->slot);
    }
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

/* The end of a request, answered or not: a generation nobody waits for any
 * more is cancelled (and counted as the client's hang-up). */
static void completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)mc;
    (void)toe;
    oct_server *s = cls;
    conn *c = *con_cls;
    if (!c)
        return;
    srv_job *j = c->job;
    if (j) {
        srv_gate_slot_watch(s->gate, c->slot, NULL, NULL);
        pthread_mutex_lock(&j->mu);
        j->wake = NULL;
        j->waiting = false;
        bool all_done = j->n_done == j->n_choices;
        int64_t gen = srv_job_completion_tokens(j);
        pthread_mutex_unlock(&j->mu);
        if (!c->streaming && !c->answered) {
            if (!all_done)
                cancel_group(s, c->group);
            srv_metrics_request(s->metrics, HTTP_CLIENT_CLOSED, j->n_prompt, gen);
        }
        srv_job_unref(j);
    }
    srv_gate_slot_next(s->gate, c->slot);
    free(c->body);
    free(c);
    *con_cls = NULL;
}

/* libmicrohttpd's connection start and end: the gate's slot. */
static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    oct_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? srv_gate_slot_open(s->gate, ci->connect_fd) : NULL;
    } else {
        srv_gate_slot_close(s->gate, *socket_context);
        *socket_context = NULL;
    }
}

/* From the gate thread: a connection whose headers are complete. */
static bool hand_off(void *user, int fd, const struct sockaddr *addr, socklen_t addr_len)
{
    oct_server *s = user;
    struct MHD_Daemon *d = s->d[s->next_d++ % N_DAEMONS];
    return MHD_add_connection(d, fd, addr, addr_len) == MHD_YES;
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

/* Enough file descriptors for every connection slot: the soft limit goes
 * up to the hard one when it is lower (as Go's runtime does). */
static void raise_fd_limit(int max_connections)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)max_connections + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
        return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < need)
        OCT_WARN("server: %llu file descriptors allowed, fewer than --max-connections %d needs",
                 (unsigned long long)rl.rlim_cur, max_connections);
}

/* The libmicrohttpd daemons, then the gate that listens and feeds them. */
static oct_status start_http(oct_server *s, const struct addrinfo *ai, oct_error *err)
{
    raise_fd_limit(s->o.max_connections);
    unsigned int flags =
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET;
    /* The per-connection pool holds the request line, headers and the I/O
     * buffers (the gate refuses headers past max_header_bytes with 431). */
    size_t pool = s->o.max_header_bytes + 8192;
    for (int i = 0; i < N_DAEMONS; i++) {
        s->d[i] =
            MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_CONNECTION_LIMIT,
                             (unsigned int)s->o.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                             (unsigned int)s->o.idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                             pool, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                             MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
        if (!s->d[i])
            return oct_error_set(err, OCT_ERR_IO, -1, "server: cannot start libmicrohttpd");
    }
    srv_gate_opts go;
    memset(&go, 0, sizeof go);
    go.max_connections = s->o.max_connections;
    go.header_timeout_s = s->o.request_header_timeout_s;
    go.idle_timeout_s = s->o.idle_timeout_s;
    go.body_timeout_s = s->o.request_body_timeout_s;
    go.body_min_rate = s->o.request_body_min_rate;
    go.max_header_bytes = s->o.max_header_bytes;
    go.hand_off = hand_off;
    go.user = s;
    oct_status st = srv_gate_create(&go, ai->ai_addr, ai->ai_addrlen, &s->gate, err);
    if (st == OCT_OK)
        s->port = srv_gate_port(s->gate);
    return st;
}

/* Resolves --host and starts serving on it. */
static oct_status listen_http(oct_server *s, oct_error *err)
{
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", s->o.port);
    const char *host = s->o.host && s->o.host[0] ? s->o.host : "127.0.0.1";
    int gr = getaddrinfo(host, port, &hints, &ai);
    if (gr != 0 || !ai)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "server: cannot resolve --host '%s': %s",
                             host, gai_strerror(gr));
    oct_status st = hosts_init(s, ai->ai_addr, err);
    if (st == OCT_OK && (st = start_http(s, ai, err)) != OCT_OK) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err ? err->message : "");
        st = oct_error_set(err, st, -1, "server: cannot listen on %s:%d: %s", host, s->o.port, why);
    }
    freeaddrinfo(ai);
    return st;
}

/* Stop ids as vLLM's: the tokenizer's eos plus config.json's and
 * generation_config.json's eos_token_id. */
static void set_eos(oct_server *s, const oct_model_config *cfg)
{
    s->n_eos = oct_model_config_eos_ids(cfg, s->eos, 15);
    int32_t tok_eos = oct_tokenizer_eos_id(s->tok);
    bool have = false;
    for (int i = 0; i < s->n_eos; i++)
        have |= s->eos[i] == tok_eos;
    if (tok_eos >= 0 && !have)
        s->eos[s->n_eos++] = tok_eos;
}

static bool limits_ok(const oct_server *s)
{
    const oct_server_opts *o = &s->o;
    return o->max_model_len >= 2 && o->max_num_seqs > 0 && o->max_connections > 0 &&
           o->idle_timeout_s >= 0 && o->max_body_bytes > 0 && o->max_json_depth > 0 &&
           o->max_n > 0 && o->request_header_timeout_s > 0 && o->request_body_timeout_s > 0 &&
           o->request_body_min_rate >= 0;
}

static oct_status start_engine(oct_server *s, oct_error *err)
{
    oct_sched_opts so;
    memset(&so, 0, sizeof so);
    so.max_num_seqs = s->o.max_num_seqs;
    so.max_model_len = s->o.max_model_len;
    so.max_num_batched_tokens = s->o.max_num_batched_tokens > 0 ? s->o.max_num_batched_tokens : 512;
    so.kv_blocks = s->o.kv_cache_tokens > 0 ? oct_ceil_div(s->o.kv_cache_tokens, 16) : 0;
    so.max_waiting = s->o.max_waiting;
    so.prefix_caching = s->o.enable_prefix_caching;
    so.gpu_memory_utilization = s->o.gpu_memory_utilization;
    so.eos_ids = s->eos;
    so.n_eos = s->n_eos;
    so.on_ttft = obs_ttft;
    so.on_itl = obs_itl;
    so.observer_user = s->metrics;
    return oct_sched_create(s->m, &so, &s->sched, err);
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
    set_eos(s, cfg);
    if ((st = oct_model_config_max_len(cfg, s->o.max_model_len, &s->o.max_model_len, err)) !=
        OCT_OK)
        goto fail;
    if (!limits_ok(s)) {
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
    if ((st = start_engine(s, err)) != OCT_OK || (st = listen_http(s, err)) != OCT_OK)
        goto fail;
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

/* Waits (s->mu held) until no job is left or the deadline passes. */
static void wait_jobs(oct_server *s, double deadline)
{
    while (s->n_active > 0 && now_s() < deadline)
        timed_wait(&s->cv, &s->mu, WAIT_SLICE_MS);
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
    wait_jobs(s, now_s() + grace_s);
    oct_sched *sched = s->sched;
    s->sched = NULL;
    s->stopped = true;
    int64_t left = s->n_active;
    pthread_mutex_unlock(&s->mu);
    if (left)
        OCT_INFO("server: cancelling %lld unfinished requests", (long long)left);
    /* Every remaining sequence ends (cancelled), which wakes every parked
     * connection: their last events and answers go out before the daemons
     * stop (libmicrohttpd must not stop with a connection suspended). */
    oct_sched_free(sched);
    pthread_mutex_lock(&s->mu);
    wait_jobs(s, now_s() + FLUSH_S);
    pthread_mutex_unlock(&s->mu);
    srv_gate_stop(s->gate);
    for (int i = 0; i < N_DAEMONS; i++) {
        if (s->d[i])
            MHD_stop_daemon(s->d[i]);
        s->d[i] = NULL;
    }
}

void oct_server_free(oct_server *s)
{
    if (!s)
        return;
    oct_server_shutdown(s, 0);
    oct_sched_free(s->sched);
    srv_gate_free(s->gate);
    srv_metrics_free(s->metrics);
    srv_hosts_free(&s->hosts);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    oct_free(s);
}
