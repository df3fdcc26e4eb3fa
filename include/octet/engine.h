/* octet/engine.h — sessions (the KV cache, forward passes) and sampling (part of octet.h, the
 * public API: docs/API.md). */
#ifndef OCTET_API_ENGINE_H
#define OCTET_API_ENGINE_H

#include "octet/model.h"
#include "octet/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A session holds a paged KV cache for up to max_seqs sequences and runs
 * token batches through the model.  One thread uses a session at a time. */

typedef struct oct_session oct_session;

/* *out is owned by the caller (oct_session_free); it keeps m, which must
 * outlive it. */
OCT_API oct_status oct_session_create(const oct_model *m, int max_seqs, int64_t max_tokens_per_seq,
                                      oct_session **out, oct_error *err);
/* The same with a KV pool of n_blocks 16-token blocks shared by all sequences
 * (n_blocks <= 0: enough for max_seqs full-length sequences).  A smaller pool
 * lets a scheduler admit more sequences and preempt when it runs out. */
OCT_API oct_status oct_session_create_pool(const oct_model *m, int max_seqs,
                                           int64_t max_tokens_per_seq, int64_t n_blocks,
                                           oct_session **out, oct_error *err);
OCT_API void oct_session_free(oct_session *s);

/* Runs n tokens: tokens[i] of sequence seq[i] at position pos[i] (positions of
 * a sequence must continue its cache: pos == its current length, in order).
 * logits: NULL, or [n_out, vocab] f32 for the rows with want_logits[i] set
 * (want_logits NULL: every row).  Tokens of several sequences may be mixed
 * (prefill and decode in one batch). */
OCT_API oct_status oct_session_forward(oct_session *s, int64_t n, const int32_t *tokens,
                                       const int32_t *seq, const int64_t *pos,
                                       const bool *want_logits, float *logits, oct_error *err);

/* Forgets a sequence (its KV blocks are freed). */
OCT_API void oct_session_reset_seq(oct_session *s, int32_t seq);
OCT_API int64_t oct_session_seq_len(const oct_session *s, int32_t seq);
/* KV-cache blocks in use / in total. */
OCT_API int64_t oct_session_kv_blocks_used(const oct_session *s);
OCT_API int64_t oct_session_kv_blocks_total(const oct_session *s);

typedef struct oct_sampling {
    float temperature;                         /* 0: greedy */
    int top_k;                                 /* 0: off */
    float top_p;                               /* 1: off */
    float min_p;                               /* 0: off */
    float repetition_penalty;                  /* 1: off */
    float presence_penalty, frequency_penalty; /* 0: off */
    uint64_t seed;
} oct_sampling;

OCT_API void oct_sampling_default(oct_sampling *s);

typedef struct oct_sampler oct_sampler;
OCT_API oct_status oct_sampler_create(const oct_sampling *params, int64_t vocab, oct_sampler **out);
OCT_API void oct_sampler_free(oct_sampler *s);
/* Picks a token (*out) from logits [vocab] (modified in place by penalties),
 * given the tokens seen so far (for penalties).  A sampler holds its random
 * state: one thread at a time.  OCT_ERR_INVALID_ARG (and *out = -1) when a
 * logit is NaN or +Inf: the model produced non-finite values (-Inf masks a
 * token and is allowed). */
OCT_API oct_status oct_sampler_sample(oct_sampler *s, float *logits, const int32_t *history,
                                      int64_t n_hist, int32_t *out);

/* Sizes the session's forward workspace for batches of up to
 * max_batch_tokens tokens and records the device's decode graphs (CUDA
 * graphs, one per batch-size bucket) for up to max_rows rows now rather
 * than on first use; the log states what they take.  Nothing to record on
 * the CPU or with enforce_eager. */
OCT_API oct_status oct_session_capture(oct_session *s, int64_t max_batch_tokens, int64_t max_rows,
                                       oct_error *err);

/* Whether oct_session_forward_sample can draw with sp: the model runs on a
 * device that samples (CUDA) and sp has no penalties. */
OCT_API bool oct_session_samples_on_device(const oct_session *s, const oct_sampling *sp);
/* oct_session_forward with the rows wanted sampled on the device: ids
 * [n_out], only token ids cross to the host.  Greedy picks what the CPU
 * sampler picks; other draws come from a Philox stream keyed by (seed, step,
 * the row's index among those wanted), not the CPU sampler's stream.  NaN or +Inf logits are an
 * error. OCT_ERR_UNSUPPORTED unless oct_session_samples_on_device(s, sp). */
OCT_API oct_status oct_session_forward_sample(oct_session *s, int64_t n, const int32_t *tokens,
                                              const int32_t *seq, const int64_t *pos,
                                              const bool *want_logits, const oct_sampling *sp,
                                              uint64_t step, int32_t *ids, oct_error *err);

/* Stop strings (vLLM's `stop`) over a sequence's text[0..len): the offset
 * of the earliest occurrence of any of them that ends after byte `old` (the
 * text up to `old` was searched before; 0: search it all), or SIZE_MAX. */
OCT_API size_t oct_stop_find(const char *text, size_t len, size_t old, const char *const *stops,
                             int n);
/* The bytes at the end of text that could still grow into a stop string
 * (the longest proper prefix of one that the text ends with): a streaming
 * front end holds them back until the next token settles it. */
OCT_API size_t oct_stop_hold(const char *text, size_t len, const char *const *stops, int n);

#ifdef __cplusplus
}
#endif
#endif
