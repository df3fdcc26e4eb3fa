/* job.h — one generation request between the HTTP side that owns the
 * connection and the engine thread that produces its tokens.
 *
 * The engine side (scheduler callbacks) detokenizes, matches stop strings
 * and records logprobs under the job's mutex; the HTTP side turns the state
 * into a JSON body or SSE events.  It never blocks on a job: it sets
 * `waiting` and suspends its connection, and the next change calls `wake`.
 * A job is reference counted: one reference for the HTTP side, one per
 * submitted choice (dropped by the scheduler's on_done). */
#ifndef OCTET_SERVER_JOB_H
#define OCTET_SERVER_JOB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/scheduler.h"
#include "server/request.h"

typedef struct srv_lp {
    int32_t id;
    float logprob; /* NaN: none (the first prompt token) */
    int n_top;
    int32_t top_ids[SRV_MAX_LOGPROBS];
    float top_lp[SRV_MAX_LOGPROBS];
    size_t text_offset; /* byte offset of the token's text in the choice text */
} srv_lp;

typedef struct srv_choice {
    struct srv_job *job;
    int index;
    oct_detokenizer *dt;
    char *text; /* generated text (after stop-string truncation) */
    size_t len, cap;
    size_t sent; /* bytes already streamed */
    srv_lp *lp;  /* [n_lp] generated tokens' logprobs */
    int64_t n_lp, cap_lp, lp_sent;
    int64_t n_gen;
    bool stop_hit, done, finish_sent, role_sent;
    oct_finish reason;
} srv_choice;

typedef struct srv_job {
    pthread_mutex_t mu;
    int refs;
    srv_request req;
    const oct_tokenizer *tok;
    const char *model_name;
    char id[48];
    long long created;
    int64_t n_prompt;
    int32_t *prompt_ids; /* [n_prompt] */
    char *echo_text;     /* completions with echo: the prompt text */
    size_t echo_len;
    srv_lp *plp; /* echo + logprobs: [n_prompt] prompt token entries */
    bool plp_ready;
    int n_choices, n_done;
    srv_choice *ch;
    char error[256]; /* engine failure message, "" if none */
    bool usage_sent, done_sent;
    /* The HTTP side parked on this job (all under mu): while `waiting`, the
     * next token, finished choice or prompt logprobs clears it and calls
     * wake(wake_user) with mu held.  `gone`: the client hung up. */
    void (*wake)(void *user);
    void *wake_user;
    bool waiting, gone;
    void (*on_free)(void *user); /* called when the last reference goes */
    void *on_free_user;
} srv_job;

/* Takes ownership of *req (zeroed) and of prompt_ids, also when it fails (NULL). */
srv_job *srv_job_new(srv_request *req, const oct_tokenizer *tok, const char *model_name,
                     int32_t *prompt_ids, int64_t n_prompt, uint64_t serial);
void srv_job_ref(srv_job *j);
void srv_job_unref(srv_job *j);

/* Scheduler callbacks; user = srv_choice*. */
bool srv_job_on_token(void *user, const oct_sched_token *t);
void srv_job_on_done(void *user, oct_finish reason, int64_t n_generated, const char *message);
void srv_job_on_prompt(void *user, const oct_sched_token *toks, int64_t n);

/* Clears `waiting` and calls wake; call with mu held. */
void srv_job_wake(srv_job *j);

/* Total generated tokens (call with mu held or after all choices are done). */
int64_t srv_job_completion_tokens(const srv_job *j);

/* Non-streaming body (all choices done).  Returns a new string (free()) or NULL. */
char *srv_job_body(srv_job *j);
/* Streaming: appends to *out (realloc'd, free()) the SSE events that are ready
 * now; returns true when the stream is complete ("data: [DONE]" appended).
 * Call with mu held. */
bool srv_job_stream(srv_job *j, char **out, size_t *len);

/* {"error": {...}} body for an error (free()). */
char *srv_error_body(const srv_error *e);

#endif
