/* scheduler.h — continuous batching over one oct_session.
 *
 * One engine thread owns the session and loops: take new requests, build a
 * batch of every running decode plus prefill chunks up to a token budget,
 * run it in ONE oct_session_forward, sample, hand tokens to the caller.
 *
 * A sequence is its token list tokens[0..n) (prompt + generated) and the
 * number of those already in the KV cache; the scheduler always feeds
 * tokens[cached..n): more than one left is a prefill (chunked by the
 * budget), exactly one is a decode.  Preempting a sequence resets its cache
 * (cached = 0) and puts it back at the head of the waiting queue; it is
 * recomputed later from the same tokens, so its output does not change.
 * With prefix caching, an admitted sequence first takes the cached blocks
 * that start its tokens (another sequence's prompt, or its own before a
 * preemption) and computes only the rest; every full block computed is
 * published for later ones; the other choices of a request (n > 1) wait
 * in the queue until the first has computed the prompt, then share its
 * blocks.  A request that wants prompt log-probabilities computes its whole
 * prompt.
 *
 * Admission is at token granularity: a waiting sequence enters as soon as a
 * slot (--max-num-seqs) and KV blocks for its next chunk are free.  When
 * running decodes need more blocks than are free, the youngest running
 * sequence is preempted.  Cancellation (client gone) frees a sequence's
 * blocks at the next step.
 *
 * Threads: submit / cancel / stats may be called from any thread; the
 * callbacks run on the engine thread and must not call back into the
 * scheduler except oct_sched_cancel. */
#ifndef OCTET_ENGINE_SCHEDULER_H
#define OCTET_ENGINE_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "octet.h"

#define OCT_SCHED_MAX_TOP_LOGPROBS 20

typedef enum {
    OCT_FINISH_STOP = 0,  /* end-of-sequence token or the callback asked to stop */
    OCT_FINISH_LENGTH,    /* max_tokens or the context length reached */
    OCT_FINISH_CANCELLED, /* oct_sched_cancel or shutdown */
    OCT_FINISH_ERROR      /* the forward pass failed (message given) */
} oct_finish;

/* One sampled token.  Log-probabilities are of the model's distribution
 * (log-softmax of the raw logits, before penalties and temperature). */
typedef struct oct_sched_token {
    int32_t id;
    int64_t index; /* 0 for the first generated token */
    bool is_eos;
    float logprob; /* NaN unless logprobs were asked for */
    int n_top;
    int32_t top_ids[OCT_SCHED_MAX_TOP_LOGPROBS];
    float top_logprobs[OCT_SCHED_MAX_TOP_LOGPROBS];
} oct_sched_token;

/* Returns true to end the sequence now (finish reason STOP), e.g. when a
 * stop string matched. */
typedef bool (*oct_sched_token_fn)(void *user, const oct_sched_token *tok);
/* Called exactly once per submitted sequence; afterwards the scheduler never
 * touches `user` again.  `message` is non-NULL for OCT_FINISH_ERROR. */
typedef void (*oct_sched_done_fn)(void *user, oct_finish reason, int64_t n_generated,
                                  const char *message);
/* Prompt log-probabilities (echo with logprobs): lp[i] / top for prompt
 * token i+1 (token 0 has none); called once, after the prompt's prefill. */
typedef void (*oct_sched_prompt_fn)(void *user, const oct_sched_token *toks, int64_t n);

typedef struct oct_sched_params {
    const int32_t *prompt; /* [n_prompt], copied */
    int64_t n_prompt;
    int64_t max_tokens; /* >= 1 */
    oct_sampling sampling;
    int logprobs;         /* -1: none; 0: the chosen token's; k: and the top k (<= 20) */
    bool prompt_logprobs; /* also for the prompt tokens (needs logprobs >= 0) */
    bool ignore_eos;
    uint64_t group;   /* oct_sched_cancel(group) ends every sequence of the group */
    double t_arrival; /* oct_sched_now() when the request arrived (TTFT) */
    oct_sched_token_fn on_token;
    oct_sched_done_fn on_done;
    oct_sched_prompt_fn on_prompt;
    void *user;
} oct_sched_params;

/* Prefix caching on a session (kv_pool.h): off until set.  attach: for an
 * empty sequence, holds the cached blocks that start tokens[0..n) (never the
 * block of the last token) and returns the tokens they cover, now in the
 * cache; commit: publishes the sequence's full blocks not yet published
 * (tokens: its tokens from 0).  stats: tokens looked up and found. */
void oct_session_set_prefix_caching(oct_session *s, bool on);
int64_t oct_session_prefix_attach(oct_session *s, int32_t seq, const int32_t *tokens, int64_t n);
void oct_session_prefix_commit(oct_session *s, int32_t seq, const int32_t *tokens);
void oct_session_prefix_stats(const oct_session *s, int64_t *queries, int64_t *hits);

/* oct_session_forward with each wanted row drawn on the device by req[i]
 * (the rows wanted in order): ids [n_out], -1 where a row's logits were not
 * finite; logprobs [n_out] the chosen ids' log-softmax (NULL: not wanted);
 * logits [n_out, vocab] the rows' logits too (NULL: not wanted), for rows
 * the host samples itself.  OCT_ERR_UNSUPPORTED on the CPU. */
oct_status oct_session_forward_draw(oct_session *s, int64_t n, const int32_t *tokens,
                                    const int32_t *seq, const int64_t *pos, const bool *want_logits,
                                    const oct_sample_req *req, int32_t *ids, float *logprobs,
                                    float *logits, oct_error *err);

/* The KV blocks that fit in util (0, 1] of the device's memory, beside
 * what is in use now (the model) and a workspace for batch_tokens; 0 on a
 * device that does not report its memory (the CPU) or with util 0, -1 and
 * err when none fit. */
int64_t oct_session_blocks_for_memory(const oct_model *m, double util, int64_t batch_tokens,
                                      oct_error *err);

typedef struct oct_sched_opts {
    int max_num_seqs;               /* running sequences at once */
    int64_t max_model_len;          /* tokens per sequence (prompt + output) */
    int64_t max_num_batched_tokens; /* tokens per forward pass (prefill chunk budget) */
    int64_t kv_blocks;              /* KV pool in 16-token blocks; <= 0: full size */
    double gpu_memory_utilization;  /* with kv_blocks <= 0 on a GPU: the pool fills this share
                                       of its memory (oct_session_blocks_for_memory); 0: off */
    int64_t max_waiting;            /* queue bound: submit fails with OCT_ERR_LIMIT beyond it */
    bool prefix_caching;            /* full blocks of earlier sequences are reused (kv_pool.h) */
    const int32_t *eos_ids;         /* [n_eos] */
    int n_eos;
    /* Engine-side observers (may be NULL), called on the engine thread:
     * first token of a sequence (seconds since arrival), gap between tokens. */
    void (*on_ttft)(void *user, double seconds);
    void (*on_itl)(void *user, double seconds);
    void *observer_user;
} oct_sched_opts;

typedef struct oct_sched_stats {
    int64_t running, waiting;
    int64_t kv_blocks_used, kv_blocks_total;
    int64_t preemptions, steps;
    int64_t prompt_tokens, generated_tokens; /* computed (prefill incl. recompute) / sampled */
    int64_t prefix_queries, prefix_hits;     /* tokens looked up in the prefix cache / found */
} oct_sched_stats;

typedef struct oct_sched oct_sched;

/* Creates the session and starts the engine thread.  `m` must outlive it. */
oct_status oct_sched_create(const oct_model *m, const oct_sched_opts *opts, oct_sched **out,
                            oct_error *err);
/* Queues a sequence.  Fails (no callback will run) with OCT_ERR_INVALID_ARG on
 * bad params, OCT_ERR_LIMIT when the queue is full or the prompt does not fit,
 * OCT_ERR_CANCELLED after shutdown began. */
oct_status oct_sched_submit(oct_sched *s, const oct_sched_params *p, oct_error *err);
/* Ends every queued or running sequence of `group` (their on_done runs with
 * OCT_FINISH_CANCELLED on the engine thread).  Unknown groups are ignored. */
void oct_sched_cancel(oct_sched *s, uint64_t group);
void oct_sched_get_stats(oct_sched *s, oct_sched_stats *out);
/* Stops the engine thread: cancels what is left, waits for it, frees all.
 * NULL is a no-op. */
void oct_sched_free(oct_sched *s);
/* Monotonic clock in seconds. */
double oct_sched_now(void);

#endif
