/* job.c — a generation request's shared state (see job.h) and its OpenAI
 * JSON shapes: text_completion / chat.completion bodies, their streaming
 * chunks, usage, logprobs, error objects. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "server/job.h"

srv_job *srv_job_new(srv_request *req, const oct_tokenizer *tok, const char *model_name,
                     int32_t *prompt_ids, int64_t n_prompt, uint64_t serial)
{
    srv_job *j = oct_calloc(1, sizeof *j);
    if (!j) {
        oct_free(prompt_ids);
        srv_request_free(req);
        return NULL;
    }
    pthread_mutex_init(&j->mu, NULL);
    j->refs = 1;
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->tok = tok;
    j->model_name = model_name;
    j->prompt_ids = prompt_ids;
    j->n_prompt = n_prompt;
    j->created = (long long)time(NULL);
    snprintf(j->id, sizeof j->id, "%s-%016llx", j->req.kind == SRV_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)serial);
    j->n_choices = j->req.n;
    j->ch = oct_calloc((size_t)j->n_choices, sizeof(srv_choice));
    if (!j->ch)
        goto fail;
    for (int i = 0; i < j->n_choices; i++) {
        j->ch[i].job = j;
        j->ch[i].index = i;
        oct_error err;
        if (oct_detokenizer_new(tok, true, &j->ch[i].dt, &err) != OCT_OK)
            goto fail;
    }
    if (j->req.kind == SRV_COMPLETIONS && j->req.echo) {
        if (j->req.prompt) {
            j->echo_text = oct_strndup(j->req.prompt, j->req.prompt_len);
            j->echo_len = j->req.prompt_len;
        } else {
            char *t = NULL;
            size_t tl = 0;
            oct_error err;
            if (oct_tokenizer_decode(tok, prompt_ids, n_prompt, false, &t, &tl, &err) != OCT_OK)
                goto fail;
            j->echo_text = oct_strndup(t, tl);
            j->echo_len = tl;
            oct_tokenizer_text_free(t);
        }
        if (!j->echo_text)
            goto fail;
        if (j->req.logprobs >= 0 && !(j->plp = oct_calloc((size_t)n_prompt, sizeof(srv_lp))))
            goto fail;
    }
    return j;
fail:
    j->refs = 1;
    srv_job_unref(j);
    return NULL;
}

void srv_job_ref(srv_job *j)
{
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

void srv_job_unref(srv_job *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0)
        return;
    void (*cb)(void *) = j->on_free;
    void *cb_user = j->on_free_user;
    if (j->ch)
        for (int i = 0; i < j->n_choices; i++) {
            oct_detokenizer_free(j->ch[i].dt);
            oct_free(j->ch[i].text);
            oct_free(j->ch[i].lp);
        }
    oct_free(j->ch);
    oct_free(j->prompt_ids);
    oct_free(j->echo_text);
    oct_free(j->plp);
    srv_request_free(&j->req);
    pthread_mutex_destroy(&j->mu);
    oct_free(j);
    if (cb)
        cb(cb_user);
}

/* ------------------------------------------------------- engine callbacks */

static bool append(srv_choice *c, const char *p, size_t n)
{
    if (c->len + n + 1 > c->cap) {
        size_t cap = (c->len + n + 1) * 2;
        char *t = oct_realloc(c->text, cap);
        if (!t)
            return false;
        c->text = t;
        c->cap = cap;
    }
    memcpy(c->text + c->len, p, n);
    c->len += n;
    c->text[c->len] = 0;
    return true;
}

/* Truncates at the earliest stop string that ends in text added after
 * `old`; true if one matched. */
static bool match_stop(srv_choice *c, size_t old)
{
    const srv_request *r = &c->job->req;
    const size_t best =
        oct_stop_find(c->text, c->len, old, (const char *const *)r->stop, r->n_stop);
    if (best == SIZE_MAX)
        return false;
    c->len = best;
    c->text[best] = 0;
    if (c->sent > best)
        c->sent = best;
    return true;
}

static void copy_lp(srv_lp *d, const oct_sched_token *t)
{
    d->id = t->id;
    d->logprob = t->logprob;
    d->n_top = OCT_MIN(t->n_top, SRV_MAX_LOGPROBS);
    for (int k = 0; k < d->n_top; k++) {
        d->top_ids[k] = t->top_ids[k];
        d->top_lp[k] = t->top_logprobs[k];
    }
}

void srv_job_wake(srv_job *j)
{
    if (!j->waiting)
        return;
    j->waiting = false;
    if (j->wake)
        j->wake(j->wake_user);
}

bool srv_job_on_token(void *user, const oct_sched_token *t)
{
    srv_choice *c = user;
    srv_job *j = c->job;
    bool stop = false;
    pthread_mutex_lock(&j->mu);
    size_t old = c->len;
    if (j->req.logprobs >= 0 && !c->stop_hit) {
        if (c->n_lp == c->cap_lp) {
            int64_t cap = c->cap_lp ? c->cap_lp * 2 : 16;
            srv_lp *p = oct_realloc(c->lp, (size_t)cap * sizeof(srv_lp));
            if (p) {
                c->lp = p;
                c->cap_lp = cap;
            }
        }
        if (c->n_lp < c->cap_lp) {
            copy_lp(&c->lp[c->n_lp], t);
            c->lp[c->n_lp++].text_offset = old;
        }
    }
    const char *piece;
    size_t plen = 0;
    oct_error err;
    if (oct_detokenizer_push(c->dt, t->id, &piece, &plen, &err) == OCT_OK && plen)
        append(c, piece, plen);
    if (j->req.n_stop && match_stop(c, old))
        stop = c->stop_hit = true;
    srv_job_wake(j);
    pthread_mutex_unlock(&j->mu);
    return stop;
}

void srv_job_on_done(void *user, oct_finish reason, int64_t n_generated, const char *message)
{
    srv_choice *c = user;
    srv_job *j = c->job;
    pthread_mutex_lock(&j->mu);
    if (!c->stop_hit) {
        const char *piece;
        size_t plen = 0;
        oct_error err;
        size_t old = c->len;
        if (oct_detokenizer_flush(c->dt, &piece, &plen, &err) == OCT_OK && plen)
            append(c, piece, plen);
        if (j->req.n_stop && match_stop(c, old))
            c->stop_hit = true;
    }
    c->reason = c->stop_hit && reason == OCT_FINISH_LENGTH ? OCT_FINISH_STOP : reason;
    c->n_gen = n_generated;
    c->done = true;
    j->n_done++;
    if (reason == OCT_FINISH_ERROR && !j->error[0])
        snprintf(j->error, sizeof j->error, "%s", message ? message : "engine error");
    srv_job_wake(j);
    pthread_mutex_unlock(&j->mu);
    srv_job_unref(j);
}

void srv_job_on_prompt(void *user, const oct_sched_token *toks, int64_t n)
{
    srv_choice *c = user;
    srv_job *j = c->job;
    pthread_mutex_lock(&j->mu);
    if (j->plp && !j->plp_ready) {
        j->plp[0].id = j->prompt_ids[0];
        j->plp[0].logprob = NAN;
        for (int64_t i = 0; i < n && i + 1 < j->n_prompt; i++)
            copy_lp(&j->plp[i + 1], &toks[i]);
        j->plp_ready = true;
    }
    srv_job_wake(j);
    pthread_mutex_unlock(&j->mu);
}

int64_t srv_job_completion_tokens(const srv_job *j)
{
    int64_t n = 0;
    for (int i = 0; i < j->n_choices; i++)
        n += j->ch[i].n_gen;
    return n;
}

/* ------------------------------------------------------------ formatting */

/* A JSON string that is never NULL: invalid UTF-8 becomes U+FFFD runs. */
static json_t *jstr(const char *s, size_t n)
{
    json_t *v = json_stringn(s, n);
    if (v)
        return v;
    char *t = malloc(n * 3 + 1);
    if (!t)
        return json_string("");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x80 && ch != 0) {
            t[k++] = (char)ch;
        } else {
            memcpy(t + k, "\xEF\xBF\xBD", 3);
            k += 3;
        }
    }
    v = json_stringn(t, k);
    free(t);
    return v ? v : json_string("");
}

static json_t *tok_str(const srv_job *j, int32_t id, json_t **bytes)
{
    char *t = NULL;
    size_t tl = 0;
    oct_error err;
    if (oct_tokenizer_decode(j->tok, &id, 1, false, &t, &tl, &err) != OCT_OK)
        t = NULL, tl = 0;
    if (bytes) {
        *bytes = json_array();
        for (size_t i = 0; i < tl; i++)
            json_array_append_new(*bytes, json_integer((unsigned char)t[i]));
    }
    json_t *v = jstr(t ? t : "", tl);
    oct_tokenizer_text_free(t);
    return v;
}

static json_t *jlp(float x)
{
    return isnan(x) ? json_null() : json_real(isinf(x) ? -9999.0 : (double)x);
}

static const char *finish_str(const srv_choice *c)
{
    switch (c->reason) {
    case OCT_FINISH_STOP: return "stop";
    case OCT_FINISH_LENGTH: return "length";
    default: return "abort";
    }
}

/* Completions logprobs object over entries lp[0..n) with a text offset base. */
static void completion_lp_add(const srv_job *j, json_t *o, const srv_lp *lp, int64_t n, size_t base)
{
    json_t *toks = json_object_get(o, "tokens"), *tl = json_object_get(o, "token_logprobs"),
           *top = json_object_get(o, "top_logprobs"), *off = json_object_get(o, "text_offset");
    for (int64_t i = 0; i < n; i++) {
        json_array_append_new(toks, tok_str(j, lp[i].id, NULL));
        json_array_append_new(tl, jlp(lp[i].logprob));
        if (isnan(lp[i].logprob)) {
            json_array_append_new(top, json_null());
        } else {
            json_t *m = json_object();
            for (int k = 0; k < lp[i].n_top; k++) {
                json_t *ks = tok_str(j, lp[i].top_ids[k], NULL);
                /* Two ids may decode to the same text: keep the first (higher). */
                if (!json_object_get(m, json_string_value(ks)))
                    json_object_set_new(m, json_string_value(ks), jlp(lp[i].top_lp[k]));
                json_decref(ks);
            }
            json_array_append_new(top, m);
        }
        json_array_append_new(off, json_integer((json_int_t)(base + lp[i].text_offset)));
    }
}

static json_t *completion_lp_new(void)
{
    json_t *o = json_object();
    json_object_set_new(o, "tokens", json_array());
    json_object_set_new(o, "token_logprobs", json_array());
    json_object_set_new(o, "top_logprobs", json_array());
    json_object_set_new(o, "text_offset", json_array());
    return o;
}

static json_t *chat_lp(const srv_job *j, const srv_lp *lp, int64_t n)
{
    json_t *arr = json_array();
    for (int64_t i = 0; i < n; i++) {
        json_t *e = json_object(), *bytes = NULL;
        json_object_set_new(e, "token", tok_str(j, lp[i].id, &bytes));
        json_object_set_new(e, "logprob", jlp(lp[i].logprob));
        json_object_set_new(e, "bytes", bytes);
        json_t *top = json_array();
        for (int k = 0; k < lp[i].n_top && k < j->req.logprobs; k++) {
            json_t *t = json_object(), *tb = NULL;
            json_object_set_new(t, "token", tok_str(j, lp[i].top_ids[k], &tb));
            json_object_set_new(t, "logprob", jlp(lp[i].top_lp[k]));
            json_object_set_new(t, "bytes", tb);
            json_array_append_new(top, t);
        }
        json_object_set_new(e, "top_logprobs", top);
        json_array_append_new(arr, e);
    }
    json_t *o = json_object();
    json_object_set_new(o, "content", arr);
    return o;
}

static json_t *usage(const srv_job *j)
{
    json_t *u = json_object();
    int64_t c = srv_job_completion_tokens(j);
    json_object_set_new(u, "prompt_tokens", json_integer(j->n_prompt));
    json_object_set_new(u, "completion_tokens", json_integer(c));
    json_object_set_new(u, "total_tokens", json_integer(j->n_prompt + c));
    return u;
}

static json_t *envelope(const srv_job *j, const char *object)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(j->id));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer(j->created));
    json_object_set_new(o, "model", json_string(j->model_name));
    return o;
}

static char *dump(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

char *srv_job_body(srv_job *j)
{
    bool chat = j->req.kind == SRV_CHAT;
    json_t *o = envelope(j, chat ? "chat.completion" : "text_completion");
    json_t *choices = json_array();
    for (int i = 0; i < j->n_choices; i++) {
        srv_choice *c = &j->ch[i];
        json_t *ch = json_object();
        json_object_set_new(ch, "index", json_integer(i));
        json_t *lp = json_null();
        if (chat) {
            json_t *msg = json_object();
            json_object_set_new(msg, "role", json_string("assistant"));
            json_object_set_new(msg, "content", jstr(c->text ? c->text : "", c->len));
            json_object_set_new(ch, "message", msg);
            if (j->req.logprobs >= 0) {
                json_decref(lp);
                lp = chat_lp(j, c->lp, c->n_lp);
            }
        } else {
            size_t n = j->echo_len + c->len;
            char *t = malloc(n + 1);
            if (t) {
                if (j->echo_len)
                    memcpy(t, j->echo_text, j->echo_len);
                if (c->len)
                    memcpy(t + j->echo_len, c->text, c->len);
            }
            json_object_set_new(ch, "text", t ? jstr(t, n) : json_string(""));
            free(t);
            if (j->req.logprobs >= 0) {
                json_decref(lp);
                lp = completion_lp_new();
                if (j->plp && j->plp_ready)
                    completion_lp_add(j, lp, j->plp, j->n_prompt, 0);
                completion_lp_add(j, lp, c->lp, c->n_lp, j->echo_len);
            }
        }
        json_object_set_new(ch, "logprobs", lp);
        json_object_set_new(ch, "finish_reason", json_string(finish_str(c)));
        json_array_append_new(choices, ch);
    }
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", usage(j));
    return dump(o);
}

static bool sse(char **out, size_t *len, const char *data)
{
    if (!data)
        return false;
    size_t n = strlen(data);
    char *p = realloc(*out, *len + n + 9);
    if (!p)
        return false;
    memcpy(p + *len, "data: ", 6);
    memcpy(p + *len + 6, data, n);
    memcpy(p + *len + 6 + n, "\n\n", 3);
    *out = p;
    *len += n + 8;
    return true;
}

/* Bytes of c->text that may be streamed: all of it once done, else all but
 * a tail that could still grow into a stop string. */
static size_t safe_len(const srv_choice *c)
{
    if (c->done || c->stop_hit)
        return c->len;
    const srv_request *r = &c->job->req;
    return c->len - oct_stop_hold(c->text, c->len, (const char *const *)r->stop, r->n_stop);
}

/* The delta (chat) or text (completions, the echo first) of choice c's
 * next chunk into ch: tl bytes of txt; returns its logprobs (or JSON null). */
static json_t *chunk_body(const srv_job *j, const srv_choice *c, json_t *ch, const char *txt,
                          size_t tl, bool first)
{
    if (j->req.kind == SRV_CHAT) {
        json_t *delta = json_object();
        if (first)
            json_object_set_new(delta, "role", json_string("assistant"));
        if (tl || first)
            json_object_set_new(delta, "content", jstr(txt, tl));
        json_object_set_new(ch, "delta", delta);
        if (j->req.logprobs >= 0 && c->n_lp > c->lp_sent)
            return chat_lp(j, c->lp + c->lp_sent, c->n_lp - c->lp_sent);
        return json_null();
    }
    size_t el = first ? j->echo_len : 0;
    char *t = malloc(el + tl + 1);
    if (t) {
        if (el)
            memcpy(t, j->echo_text, el);
        if (tl)
            memcpy(t + el, txt, tl);
    }
    json_object_set_new(ch, "text", t ? jstr(t, el + tl) : json_string(""));
    free(t);
    if (j->req.logprobs < 0 || !(c->n_lp > c->lp_sent || (first && j->plp_ready)))
        return json_null();
    json_t *lp = completion_lp_new();
    if (first && j->plp && j->plp_ready)
        completion_lp_add(j, lp, j->plp, j->n_prompt, 0);
    completion_lp_add(j, lp, c->lp + c->lp_sent, c->n_lp - c->lp_sent, j->echo_len);
    return lp;
}

/* Choice i's next chunk event, when it has one (its opening, text past what
 * was sent, logprobs, or its finish); *all_final &= it has finished.  false:
 * the output failed. */
static bool stream_choice(srv_job *j, int i, const char *object, char **out, size_t *len,
                          bool *all_final)
{
    srv_choice *c = &j->ch[i];
    size_t upto = safe_len(c);
    bool first = !c->role_sent;
    /* Chat opens with a role chunk at once; completions wait for text
     * (or send the echo), so the first event marks the first token. */
    bool open_now = first && (j->req.kind == SRV_CHAT || j->echo_len);
    bool more_text = upto > c->sent || c->n_lp > c->lp_sent;
    /* A cancelled choice (shutdown) ends like any other: its last chunk
     * carries the text held back for stop strings and "abort". */
    bool fin = c->done && !c->finish_sent;
    if (!open_now && !more_text && !fin) {
        *all_final &= c->finish_sent;
        return true;
    }
    json_t *o = envelope(j, object);
    json_t *ch = json_object();
    json_object_set_new(ch, "index", json_integer(i));
    const char *txt = c->text ? c->text + c->sent : "";
    size_t tl = upto > c->sent ? upto - c->sent : 0;
    json_object_set_new(ch, "logprobs", chunk_body(j, c, ch, txt, tl, first));
    bool final_now = c->done && upto == c->len;
    json_object_set_new(ch, "finish_reason", final_now ? json_string(finish_str(c)) : json_null());
    json_t *arr = json_array();
    json_array_append_new(arr, ch);
    json_object_set_new(o, "choices", arr);
    char *s = dump(o);
    bool ok = sse(out, len, s);
    free(s);
    if (!ok)
        return false;
    c->role_sent = true;
    c->sent = upto;
    c->lp_sent = c->n_lp;
    if (final_now)
        c->finish_sent = true;
    *all_final &= c->finish_sent;
    return true;
}

bool srv_job_stream(srv_job *j, char **out, size_t *len)
{
    const char *object = j->req.kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion";
    if (j->error[0] && j->n_done == j->n_choices) {
        srv_error e;
        srv_error_set(&e, 500, "server_error", "", "%s", j->error);
        char *b = srv_error_body(&e);
        sse(out, len, b);
        free(b);
        sse(out, len, "[DONE]");
        return true;
    }
    bool all_final = true;
    for (int i = 0; i < j->n_choices; i++)
        if (!stream_choice(j, i, object, out, len, &all_final))
            return false;
    if (!all_final || j->n_done < j->n_choices)
        return false;
    if (j->req.include_usage && !j->usage_sent) {
        json_t *o = envelope(j, object);
        json_object_set_new(o, "choices", json_array());
        json_object_set_new(o, "usage", usage(j));
        char *s = dump(o);
        sse(out, len, s);
        free(s);
        j->usage_sent = true;
    }
    sse(out, len, "[DONE]");
    j->done_sent = true;
    return true;
}

char *srv_error_body(const srv_error *e)
{
    json_t *o = json_object(), *er = json_object();
    json_object_set_new(er, "message", jstr(e->message, strlen(e->message)));
    json_object_set_new(er, "type", json_string(e->type ? e->type : "invalid_request_error"));
    json_object_set_new(er, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(er, "code", json_integer(e->http));
    json_object_set_new(o, "error", er);
    return dump(o);
}
