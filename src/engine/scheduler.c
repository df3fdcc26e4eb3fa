/* scheduler.c — continuous batching (see scheduler.h for the model).
 *
 * Engine-thread state (waiting queue, running slots, samplers) is touched
 * only by the engine thread; `mu` guards what other threads hand in
 * (incoming sequences, cancelled groups, the stop flag) and the published
 * stats. */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "engine/scheduler.h"

#define KV_BLOCK 16 /* session.c's block size */

typedef struct seq {
    struct seq *next; /* incoming / waiting list */
    oct_sched_params p;
    int32_t *tokens; /* [cap]: prompt then generated */
    int64_t n_tokens, cap, n_prompt;
    int64_t cached; /* tokens[0..cached) are in the KV cache */
    int32_t slot;   /* session sequence id while running, else -1 */
    uint64_t order; /* arrival order: the youngest has the largest */
    oct_sampler *smp;
    int64_t n_gen;
    double t_last;
    oct_sched_token *plp; /* [n_prompt - 1] prompt logprobs being filled */
    bool prompt_lp_done;
    bool batched; /* has rows in the batch being built */
} seq;

struct oct_sched {
    const oct_model *m;
    oct_session *sess;
    oct_sched_opts o;
    int32_t *eos;
    int64_t vocab;
    pthread_t thread;
    bool thread_started;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    seq *in_head, *in_tail; /* submitted, not yet seen by the engine */
    int64_t n_in;
    int64_t eng_waiting; /* the engine's queue length at its last step */
    uint64_t *cancels;   /* groups to cancel */
    int64_t n_cancels, cap_cancels;
    bool stop;
    oct_sched_stats stats; /* published after every step */
    uint64_t next_order;

    /* engine thread only */
    seq *wait_head, *wait_tail;
    int64_t n_wait;
    seq **running; /* [max_num_seqs] by slot */
    int64_t n_running;
    int64_t preemptions, steps, prompt_tokens, gen_tokens;
    /* batch buffers */
    int32_t *b_tok, *b_seq;
    int64_t *b_pos;
    bool *b_want;
    int64_t b_cap;
    seq **b_owner; /* [b_cap] which sequence a row belongs to */
    /* per row wanted, on a device that samples: its draw, the id and
     * logprob drawn, and whether the host samples it from its logits
     * instead (penalties, top logprobs, prompt logprobs) */
    oct_sample_req *b_req;
    int32_t *b_ids;
    float *b_lp;
    bool *b_host;
    bool device_draws;
    float *logits, *scratch;
    int64_t logits_rows;
};

double oct_sched_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t blocks_for(int64_t n_tokens)
{
    return oct_ceil_div(n_tokens, KV_BLOCK);
}

/* Blocks a sequence must take to cache `chunk` more tokens. */
static int64_t blocks_needed(const seq *q, int64_t chunk)
{
    return blocks_for(q->cached + chunk) - blocks_for(q->cached);
}

static void seq_free(seq *q)
{
    if (!q)
        return;
    oct_sampler_free(q->smp);
    oct_free(q->tokens);
    oct_free(q->plp);
    oct_free(q);
}

/* ---------------------------------------------------------------- lists */

static void wait_push_back(oct_sched *s, seq *q)
{
    q->next = NULL;
    if (s->wait_tail)
        s->wait_tail->next = q;
    else
        s->wait_head = q;
    s->wait_tail = q;
    s->n_wait++;
}

static void wait_push_front(oct_sched *s, seq *q)
{
    q->next = s->wait_head;
    s->wait_head = q;
    if (!s->wait_tail)
        s->wait_tail = q;
    s->n_wait++;
}

static seq *wait_pop(oct_sched *s)
{
    seq *q = s->wait_head;
    if (!q)
        return NULL;
    s->wait_head = q->next;
    if (!s->wait_head)
        s->wait_tail = NULL;
    q->next = NULL;
    s->n_wait--;
    return q;
}

/* Ends a sequence: frees its KV blocks and slot, reports, frees it. */
static void finish(oct_sched *s, seq *q, oct_finish why, const char *msg)
{
    if (q->slot >= 0) {
        oct_session_reset_seq(s->sess, q->slot);
        s->running[q->slot] = NULL;
        s->n_running--;
        q->slot = -1;
    }
    if (q->p.on_done)
        q->p.on_done(q->p.user, why, q->n_gen, msg);
    seq_free(q);
}

/* Puts a running sequence back in the queue; it will recompute its tokens. */
static void preempt(oct_sched *s, seq *q)
{
    oct_session_reset_seq(s->sess, q->slot);
    s->running[q->slot] = NULL;
    s->n_running--;
    q->slot = -1;
    q->cached = 0;
    wait_push_front(s, q);
    s->preemptions++;
    OCT_DEBUG("scheduler: preempted a sequence of %lld tokens", (long long)q->n_tokens);
}

static seq *youngest_running(oct_sched *s)
{
    seq *y = NULL;
    for (int i = 0; i < s->o.max_num_seqs; i++) {
        seq *q = s->running[i];
        if (q && (!y || q->order > y->order))
            y = q;
    }
    return y;
}

static int32_t free_slot(oct_sched *s)
{
    for (int i = 0; i < s->o.max_num_seqs; i++)
        if (!s->running[i])
            return (int32_t)i;
    return -1;
}

/* ------------------------------------------------------------ logprobs */

/* Log-softmax facts of a raw logits row: the chosen token's log-probability
 * and the top k (ties: lower id first). */
static void fill_logprobs(const float *row, int64_t V, int k, int32_t chosen, oct_sched_token *t)
{
    float mx = row[0];
    for (int64_t v = 1; v < V; v++)
        mx = row[v] > mx ? row[v] : mx;
    double sum = 0.0;
    for (int64_t v = 0; v < V; v++)
        sum += exp((double)(row[v] - mx));
    float lse = mx + (float)log(sum);
    t->logprob = row[chosen] - lse;
    t->n_top = 0;
    for (int64_t v = 0; v < V && k > 0; v++) {
        float x = row[v];
        int n = t->n_top;
        if (n == k && !(x > t->top_logprobs[n - 1]))
            continue;
        int i = n < k ? n : k - 1;
        while (i > 0 && x > t->top_logprobs[i - 1]) {
            t->top_logprobs[i] = t->top_logprobs[i - 1];
            t->top_ids[i] = t->top_ids[i - 1];
            i--;
        }
        t->top_logprobs[i] = x;
        t->top_ids[i] = (int32_t)v;
        if (n < k)
            t->n_top++;
    }
    for (int i = 0; i < t->n_top; i++)
        t->top_logprobs[i] -= lse;
}

/* ----------------------------------------------------------------- step */

static bool grow(void **p, int64_t cap, size_t esz)
{
    void *q = oct_realloc(*p, (size_t)cap * esz);
    if (q)
        *p = q;
    return q != NULL;
}

static bool ensure_batch(oct_sched *s, int64_t n)
{
    if (n <= s->b_cap)
        return true;
    int64_t cap = OCT_MAX(n, s->b_cap * 2);
    bool ok = grow((void **)&s->b_tok, cap, sizeof *s->b_tok);
    ok &= grow((void **)&s->b_seq, cap, sizeof *s->b_seq);
    ok &= grow((void **)&s->b_pos, cap, sizeof *s->b_pos);
    ok &= grow((void **)&s->b_want, cap, sizeof *s->b_want);
    ok &= grow((void **)&s->b_owner, cap, sizeof *s->b_owner);
    ok &= grow((void **)&s->b_req, cap, sizeof *s->b_req);
    ok &= grow((void **)&s->b_ids, cap, sizeof *s->b_ids);
    ok &= grow((void **)&s->b_lp, cap, sizeof *s->b_lp);
    ok &= grow((void **)&s->b_host, cap, sizeof *s->b_host);
    if (ok)
        s->b_cap = cap;
    return ok;
}

static bool ensure_logits(oct_sched *s, int64_t rows)
{
    if (rows <= s->logits_rows)
        return true;
    size_t bytes;
    if (!oct_size_mul((size_t)rows, (size_t)s->vocab * sizeof(float), &bytes))
        return false;
    float *l = oct_realloc(s->logits, bytes);
    if (!l)
        return false;
    s->logits = l;
    s->logits_rows = rows;
    return true;
}

/* Adds tokens[cached .. cached+chunk) of q to the batch. */
static void add_rows(oct_sched *s, seq *q, int64_t chunk, int64_t *n)
{
    bool want_prompt = q->p.prompt_logprobs && !q->prompt_lp_done;
    q->batched = true;
    for (int64_t i = 0; i < chunk; i++) {
        int64_t pos = q->cached + i;
        s->b_tok[*n] = q->tokens[pos];
        s->b_seq[*n] = q->slot;
        s->b_pos[*n] = pos;
        s->b_want[*n] = pos == q->n_tokens - 1 || (want_prompt && pos < q->n_prompt - 1);
        s->b_owner[*n] = q;
        (*n)++;
    }
}

static bool is_eos(const oct_sched *s, int32_t id)
{
    for (int i = 0; i < s->o.n_eos; i++)
        if (s->eos[i] == id)
            return true;
    return false;
}

/* Reports q's next token t (id, logprobs set); may finish q (then returns
 * false). */
static bool report(oct_sched *s, seq *q, oct_sched_token *t)
{
    t->index = q->n_gen;
    t->is_eos = is_eos(s, t->id);
    q->tokens[q->n_tokens++] = t->id;
    q->n_gen++;
    s->gen_tokens++;
    double now = oct_sched_now();
    if (q->n_gen == 1 && s->o.on_ttft)
        s->o.on_ttft(s->o.observer_user, now - q->p.t_arrival);
    else if (q->n_gen > 1 && s->o.on_itl)
        s->o.on_itl(s->o.observer_user, now - q->t_last);
    q->t_last = now;
    bool stop = q->p.on_token ? q->p.on_token(q->p.user, t) : false;
    if (stop || (t->is_eos && !q->p.ignore_eos)) {
        finish(s, q, OCT_FINISH_STOP, NULL);
        return false;
    }
    if (q->n_gen >= q->p.max_tokens || q->n_tokens >= s->o.max_model_len) {
        finish(s, q, OCT_FINISH_LENGTH, NULL);
        return false;
    }
    return true;
}

static const char k_nonfinite[] = "the model produced non-finite logits (NaN or +Inf)";

/* Samples the next token of q from its logits row and reports it. */
static bool emit(oct_sched *s, seq *q, float *row)
{
    oct_sched_token t;
    memset(&t, 0, sizeof t);
    t.logprob = NAN;
    bool lp = q->p.logprobs >= 0;
    if (lp)
        memcpy(s->scratch, row, (size_t)s->vocab * sizeof(float));
    if (oct_sampler_sample(q->smp, row, q->tokens, q->n_tokens, &t.id) != OCT_OK) {
        finish(s, q, OCT_FINISH_ERROR, k_nonfinite);
        return false;
    }
    if (lp)
        fill_logprobs(s->scratch, s->vocab, q->p.logprobs, t.id, &t);
    return report(s, q, &t);
}

/* Reports the token drawn for q on the device (id -1: non-finite logits). */
static bool emit_drawn(oct_sched *s, seq *q, int32_t id, float logprob)
{
    oct_sched_token t;
    memset(&t, 0, sizeof t);
    t.logprob = q->p.logprobs >= 0 ? logprob : NAN;
    t.id = id;
    if (id < 0) {
        finish(s, q, OCT_FINISH_ERROR, k_nonfinite);
        return false;
    }
    return report(s, q, &t);
}

/* A running sequence of q's group (the choices of one request, n > 1) with
 * the same prompt whose prefill has not finished: q waits for its blocks. */
static bool twin_prefilling(const oct_sched *s, const seq *q)
{
    for (int i = 0; i < s->o.max_num_seqs; i++) {
        const seq *r = s->running[i];
        if (r && r->p.group == q->p.group && r->n_prompt == q->n_prompt &&
            r->cached < r->n_prompt - 1 &&
            !memcmp(r->tokens, q->tokens, (size_t)q->n_prompt * sizeof(int32_t)))
            return true;
    }
    return false;
}

/* With prefix caching, a sequence being admitted (empty, in q->slot) takes
 * the cached blocks that start its tokens: q->cached covers them.  Returns the
 * blocks that were free (evictable) and are held now. */
static int64_t attach_prefix(oct_sched *s, seq *q)
{
    if (!s->o.prefix_caching || q->p.prompt_logprobs)
        return 0;
    const int64_t used = oct_session_kv_blocks_used(s->sess);
    q->cached = oct_session_prefix_attach(s->sess, q->slot, q->tokens, q->n_tokens);
    return oct_session_kv_blocks_used(s->sess) - used;
}

/* What a batch being built has left: tokens of the forward pass, KV blocks. */
typedef struct room {
    int64_t budget, free_blocks, total;
} room;

/* 1. Every running decode gets one token; the youngest sequences are
 *    preempted until the decodes' new blocks fit. */
static void add_decodes(oct_sched *s, room *rm, int64_t *n)
{
    for (;;) {
        int64_t need = 0;
        for (int i = 0; i < s->o.max_num_seqs; i++) {
            seq *q = s->running[i];
            if (q && q->n_tokens - q->cached == 1)
                need += blocks_needed(q, 1);
        }
        if (need <= rm->free_blocks)
            break;
        preempt(s, youngest_running(s)); /* shared blocks stay held: count again */
        rm->free_blocks = rm->total - oct_session_kv_blocks_used(s->sess);
    }
    for (int i = 0; i < s->o.max_num_seqs; i++) {
        seq *q = s->running[i];
        if (q && q->n_tokens - q->cached == 1) {
            rm->free_blocks -= blocks_needed(q, 1);
            add_rows(s, q, 1, n);
            rm->budget--;
        }
    }
}

/* The next prefill to take a chunk: the oldest running one not in the batch
 * yet, else the head of the queue (*admit) when a slot is free and no twin
 * of it is still computing the same prompt. */
static seq *next_prefill(oct_sched *s, bool *admit)
{
    seq *best = NULL;
    for (int i = 0; i < s->o.max_num_seqs; i++) {
        seq *q = s->running[i];
        if (q && !q->batched && q->n_tokens - q->cached > 1 && (!best || q->order < best->order))
            best = q;
    }
    *admit = false;
    seq *h = s->wait_head;
    if (!best && h && s->n_running < s->o.max_num_seqs &&
        !(s->o.prefix_caching && h->n_prompt > KV_BLOCK && twin_prefilling(s, h))) {
        best = h;
        *admit = true;
    }
    return best;
}

/* 2. A chunk of q's tokens into the batch, as much as the budget and the free
 *    blocks allow; a queued q (admit) is admitted first.  Returns false when
 *    nothing fits (FIFO: later requests wait too, so none starves). */
static bool add_prefill(oct_sched *s, seq *q, bool admit, room *rm, int64_t *n)
{
    if (admit) { /* its slot, and the cached blocks that start its tokens */
        q->slot = free_slot(s);
        rm->free_blocks -= attach_prefix(s, q);
    }
    int64_t chunk = OCT_MIN(q->n_tokens - q->cached, rm->budget);
    const int64_t fits = (blocks_for(q->cached) + rm->free_blocks) * KV_BLOCK - q->cached;
    chunk = OCT_MIN(chunk, fits);
    if (chunk <= 0) {
        if (admit) { /* not admitted after all: its blocks go back */
            int64_t used = oct_session_kv_blocks_used(s->sess);
            oct_session_reset_seq(s->sess, q->slot);
            rm->free_blocks += used - oct_session_kv_blocks_used(s->sess);
            q->slot = -1;
            q->cached = 0;
        }
        return false;
    }
    if (admit) {
        wait_pop(s);
        s->running[q->slot] = q;
        s->n_running++;
    }
    rm->free_blocks -= blocks_needed(q, chunk);
    add_rows(s, q, chunk, n);
    rm->budget -= chunk;
    return true;
}

/* Ends every sequence with rows in the failed batch of n rows. */
static void fail_batch(oct_sched *s, int64_t n, const char *msg)
{
    for (int64_t r = 0; r < n; r++) {
        seq *q = s->b_owner[r];
        if (q && q->slot >= 0 && s->running[q->slot] == q) {
            for (int64_t k = r; k < n; k++)
                if (s->b_owner[k] == q)
                    s->b_owner[k] = NULL;
            finish(s, q, OCT_FINISH_ERROR, msg);
        }
    }
}

/* 3. After the pass: each sequence's cache covers its rows, and its full
 *    blocks are published to the prefix cache. */
static void advance(oct_sched *s, int64_t n)
{
    for (int64_t r = 0; r < n; r++) {
        seq *q = s->b_owner[r];
        q->cached = s->b_pos[r] + 1;
        if (q->cached <= q->n_prompt)
            s->prompt_tokens++;
    }
    for (int64_t r = 0; r < n; r++) {
        seq *q = s->b_owner[r];
        if (q->batched && s->o.prefix_caching)
            oct_session_prefix_commit(s->sess, q->slot, q->tokens);
        q->batched = false;
    }
}

/* The logits row of q at a prompt position (cached tokens after it): the
 * prompt log-probability of the next token, handed over with the last. */
static void prompt_logprob(seq *q, int64_t cached, const float *lrow, int64_t V)
{
    int64_t i = cached - 1; /* predicts tokens[i + 1] */
    fill_logprobs(lrow, V, q->p.logprobs, q->tokens[i + 1], &q->plp[i]);
    q->plp[i].id = q->tokens[i + 1];
    q->plp[i].index = i + 1;
    if (i + 1 == q->n_prompt - 1) {
        q->prompt_lp_done = true;
        if (q->p.on_prompt)
            q->p.on_prompt(q->p.user, q->plp, q->n_prompt - 1);
    }
}

/* Whether q's next token can be drawn on the device: no penalties (they
 * need the history) and no top logprobs (they need the whole row). */
static bool draws_on_device(const seq *q)
{
    const oct_sampling *sp = &q->p.sampling;
    return q->p.logprobs <= 0 && sp->repetition_penalty == 1.0f && sp->presence_penalty == 0.0f &&
           sp->frequency_penalty == 0.0f;
}

/* 3b. On a device that samples: each wanted row's draw, keyed by the
 *     sequence's seed and token index alone, so a request draws alike in any
 *     batch.  Returns the rows the host samples from their logits. */
static int64_t plan_draws(oct_sched *s, int64_t n)
{
    int64_t row = 0, host = 0;
    for (int64_t r = 0; r < n; r++) {
        if (!s->b_want[r])
            continue;
        const seq *q = s->b_owner[r];
        const oct_sampling *sp = &q->p.sampling;
        const bool next = s->b_pos[r] + 1 >= q->n_tokens; /* not a prompt logprob */
        s->b_host[row] = !next || !draws_on_device(q);
        host += s->b_host[row];
        s->b_req[row] = (oct_sample_req){sp->temperature, sp->top_p,          sp->min_p, sp->top_k,
                                         sp->seed,        (uint64_t)q->n_gen, 0};
        row++;
    }
    return host;
}

/* 4. Each row whose logits were wanted: a prompt log-probability, or the
 *    sequence's next token where its last token ran (drawn on the device,
 *    or sampled here). */
static void sample_rows(oct_sched *s, int64_t n)
{
    int64_t row = 0;
    for (int64_t r = 0; r < n; r++) {
        if (!s->b_want[r])
            continue;
        seq *q = s->b_owner[r];
        const int64_t cached = s->b_pos[r] + 1; /* after this row */
        float *lrow = s->logits + (size_t)row * (size_t)s->vocab;
        const bool drawn = s->device_draws && !s->b_host[row];
        const int64_t i = row++;
        if (cached < q->n_tokens) {
            prompt_logprob(q, cached, lrow, s->vocab);
            continue;
        }
        if (q->p.prompt_logprobs && !q->prompt_lp_done) { /* one-token prompt */
            q->prompt_lp_done = true;
            if (q->p.on_prompt)
                q->p.on_prompt(q->p.user, q->plp, 0);
        }
        /* q may be freed here; it has no later rows */
        if (drawn)
            emit_drawn(s, q, s->b_ids[i], s->b_lp[i]);
        else
            emit(s, q, lrow);
    }
}

/* 3. The forward pass of the batch's n tokens (rows wanted). */
static oct_status run_batch(oct_sched *s, int64_t n, int64_t rows, oct_error *err)
{
    const int64_t host = s->device_draws ? plan_draws(s, n) : rows;
    if (host > 0 && !ensure_logits(s, rows))
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory for a batch");
    if (!s->device_draws)
        return oct_session_forward(s->sess, n, s->b_tok, s->b_seq, s->b_pos, s->b_want, s->logits,
                                   err);
    return oct_session_forward_draw(s->sess, n, s->b_tok, s->b_seq, s->b_pos, s->b_want, s->b_req,
                                    s->b_ids, s->b_lp, host > 0 ? s->logits : NULL, err);
}

static void fail_running(oct_sched *s, const char *msg)
{
    OCT_ERROR("scheduler: %s; cancelling the running sequences", msg);
    for (int i = 0; i < s->o.max_num_seqs; i++)
        if (s->running[i])
            finish(s, s->running[i], OCT_FINISH_ERROR, msg);
}

/* Builds and runs one batch.  Returns false when there was nothing to do. */
static bool step(oct_sched *s)
{
    const int64_t total = oct_session_kv_blocks_total(s->sess);
    room rm = {s->o.max_num_batched_tokens, total - oct_session_kv_blocks_used(s->sess), total};
    int64_t n = 0;
    if (!ensure_batch(s, rm.budget + s->o.max_num_seqs)) {
        fail_running(s, "out of memory for a batch");
        return true;
    }
    add_decodes(s, &rm, &n);
    bool admit;
    seq *q;
    while (rm.budget > 0 && (q = next_prefill(s, &admit)) && add_prefill(s, q, admit, &rm, &n))
        ; /* 2. prefill chunks: running prompts oldest first, then admissions */
    if (n == 0) {
        if (s->n_running == 0)
            return false;
        /* Prefills that together hold every block: let the oldest go on. */
        preempt(s, youngest_running(s));
        return true;
    }
    int64_t rows = 0;
    for (int64_t r = 0; r < n; r++)
        rows += s->b_want[r];
    oct_error err;
    oct_error_clear(&err);
    oct_status st = run_batch(s, n, rows, &err);
    s->steps++;
    if (st != OCT_OK) {
        OCT_ERROR("scheduler: forward pass of %lld tokens failed: %s", (long long)n, err.message);
        fail_batch(s, n, err.message);
        return true;
    }
    advance(s, n);
    sample_rows(s, n);
    return true;
}

static bool group_cancelled(const uint64_t *g, int64_t n, uint64_t group)
{
    for (int64_t i = 0; i < n; i++)
        if (g[i] == group)
            return true;
    return false;
}

/* Applies cancellations taken from the shared list (engine thread). */
static void apply_cancels(oct_sched *s, const uint64_t *g, int64_t n, bool all)
{
    for (int i = 0; i < s->o.max_num_seqs; i++) {
        seq *q = s->running[i];
        if (q && (all || group_cancelled(g, n, q->p.group)))
            finish(s, q, OCT_FINISH_CANCELLED, NULL);
    }
    seq *keep_head = NULL, *keep_tail = NULL;
    int64_t kept = 0;
    seq *q;
    while ((q = wait_pop(s))) {
        if (all || group_cancelled(g, n, q->p.group)) {
            finish(s, q, OCT_FINISH_CANCELLED, NULL);
            continue;
        }
        q->next = NULL;
        if (keep_tail)
            keep_tail->next = q;
        else
            keep_head = q;
        keep_tail = q;
        kept++;
    }
    s->wait_head = keep_head;
    s->wait_tail = keep_tail;
    s->n_wait = kept;
}

static void publish_stats(oct_sched *s)
{
    oct_sched_stats st;
    st.running = s->n_running;
    st.waiting = s->n_wait;
    st.kv_blocks_used = oct_session_kv_blocks_used(s->sess);
    st.kv_blocks_total = oct_session_kv_blocks_total(s->sess);
    st.preemptions = s->preemptions;
    st.steps = s->steps;
    st.prompt_tokens = s->prompt_tokens;
    st.generated_tokens = s->gen_tokens;
    oct_session_prefix_stats(s->sess, &st.prefix_queries, &st.prefix_hits);
    pthread_mutex_lock(&s->mu);
    s->eng_waiting = st.waiting;
    st.waiting += s->n_in;
    s->stats = st;
    pthread_mutex_unlock(&s->mu);
}

static void *engine_main(void *arg)
{
    oct_sched *s = arg;
    uint64_t *g = NULL;
    int64_t g_cap = 0;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && !s->in_head && s->n_cancels == 0 && s->n_running == 0 && !s->wait_head)
            pthread_cond_wait(&s->cv, &s->mu);
        bool stop = s->stop;
        seq *in = s->in_head;
        s->in_head = s->in_tail = NULL;
        s->n_in = 0;
        int64_t ng = s->n_cancels;
        if (ng > g_cap) {
            uint64_t *ng_buf = oct_realloc(g, (size_t)ng * sizeof(uint64_t));
            if (ng_buf) {
                g = ng_buf;
                g_cap = ng;
            }
        }
        ng = OCT_MIN(ng, g_cap);
        if (ng)
            memcpy(g, s->cancels, (size_t)ng * sizeof(uint64_t));
        s->n_cancels = 0;
        pthread_mutex_unlock(&s->mu);
        while (in) {
            seq *nx = in->next;
            wait_push_back(s, in);
            in = nx;
        }
        if (stop || ng)
            apply_cancels(s, g, ng, stop);
        if (stop)
            break;
        step(s);
        publish_stats(s);
    }
    oct_free(g);
    publish_stats(s);
    return NULL;
}

/* ------------------------------------------------------------------ API */

/* The session: its KV pool (on a GPU, what --gpu-memory-utilization leaves
 * unless kv_blocks is set), prefix caching, and the workspace of the
 * largest batch with its decode graphs. */
static oct_status open_session(oct_sched *s, oct_error *err)
{
    const int64_t batch = s->o.max_num_batched_tokens + s->o.max_num_seqs;
    if (s->o.kv_blocks <= 0) {
        const int64_t fit =
            oct_session_blocks_for_memory(s->m, s->o.gpu_memory_utilization, batch, err);
        if (fit < 0)
            return err->status;
        if (fit > 0 && fit < blocks_for(s->o.max_model_len))
            return oct_error_set(err, OCT_ERR_NOMEM, -1,
                                 "--gpu-memory-utilization %.2f leaves KV room for %lld tokens, "
                                 "fewer than one sequence of --max-model-len %lld",
                                 s->o.gpu_memory_utilization, (long long)fit * KV_BLOCK,
                                 (long long)s->o.max_model_len);
        s->o.kv_blocks = fit;
    }
    oct_status st = oct_session_create_pool(s->m, s->o.max_num_seqs, s->o.max_model_len,
                                            s->o.kv_blocks, &s->sess, err);
    if (st != OCT_OK)
        return st;
    oct_session_set_prefix_caching(s->sess, s->o.prefix_caching);
    oct_sampling plain;
    oct_sampling_default(&plain);
    s->device_draws = oct_session_samples_on_device(s->sess, &plain);
    return oct_session_capture(s->sess, batch, s->o.max_num_seqs, err);
}

oct_status oct_sched_create(const oct_model *m, const oct_sched_opts *opts, oct_sched **out,
                            oct_error *err)
{
    *out = NULL;
    if (!m || !opts || opts->max_num_seqs <= 0 || opts->max_model_len <= 1 || opts->n_eos < 0 ||
        (opts->n_eos > 0 && !opts->eos_ids))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "scheduler: bad options");
    oct_sched *s = oct_calloc(1, sizeof *s);
    if (!s)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "scheduler: out of memory");
    s->m = m;
    s->o = *opts;
    s->vocab = oct_model_vocab_size(m);
    /* A forward pass must hold every running decode; one sequence must fit
     * the pool at full length, or preemption could not make progress. */
    if (s->o.max_num_batched_tokens < s->o.max_num_seqs)
        s->o.max_num_batched_tokens = s->o.max_num_seqs;
    if (s->o.kv_blocks > 0 && s->o.kv_blocks < blocks_for(s->o.max_model_len))
        s->o.kv_blocks = blocks_for(s->o.max_model_len);
    if (s->o.max_waiting <= 0)
        s->o.max_waiting = 1024;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    oct_status st = open_session(s, err);
    if (st != OCT_OK)
        goto fail;
    s->eos = oct_calloc((size_t)OCT_MAX(s->o.n_eos, 1), sizeof(int32_t));
    s->running = oct_calloc((size_t)s->o.max_num_seqs, sizeof(seq *));
    s->scratch = oct_malloc((size_t)s->vocab * sizeof(float));
    if (!s->eos || !s->running || !s->scratch) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "scheduler: out of memory");
        goto fail;
    }
    if (s->o.n_eos)
        memcpy(s->eos, opts->eos_ids, (size_t)s->o.n_eos * sizeof(int32_t));
    s->o.eos_ids = s->eos;
    publish_stats(s);
    if (pthread_create(&s->thread, NULL, engine_main, s) != 0) {
        st = oct_error_set(err, OCT_ERR_INTERNAL, -1, "scheduler: cannot start the engine thread");
        goto fail;
    }
    s->thread_started = true;
    *out = s;
    return OCT_OK;
fail:
    oct_sched_free(s);
    return st;
}

oct_status oct_sched_submit(oct_sched *s, const oct_sched_params *p, oct_error *err)
{
    if (!s || !p || !p->prompt || p->n_prompt <= 0 || p->max_tokens <= 0 ||
        p->logprobs > OCT_SCHED_MAX_TOP_LOGPROBS || (p->prompt_logprobs && p->logprobs < 0))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "scheduler: bad request parameters");
    if (p->n_prompt >= s->o.max_model_len)
        return oct_error_set(err, OCT_ERR_LIMIT, -1,
                             "the prompt has %lld tokens; the limit is %lld (max_model_len)",
                             (long long)p->n_prompt, (long long)s->o.max_model_len - 1);
    for (int64_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= s->vocab)
            return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                 "prompt token id %d is outside the vocabulary (%lld)",
                                 p->prompt[i], (long long)s->vocab);
    seq *q = oct_calloc(1, sizeof *q);
    if (!q)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    q->p = *p;
    q->slot = -1;
    q->n_prompt = p->n_prompt;
    int64_t cap = OCT_MIN(p->n_prompt + p->max_tokens, s->o.max_model_len) + 1;
    q->cap = cap;
    q->tokens = oct_malloc((size_t)cap * sizeof(int32_t));
    if (p->prompt_logprobs)
        q->plp = oct_calloc((size_t)p->n_prompt, sizeof(oct_sched_token));
    oct_status st = oct_sampler_create(&p->sampling, s->vocab, &q->smp);
    if (st != OCT_OK || !q->tokens || (p->prompt_logprobs && !q->plp)) {
        seq_free(q);
        return st == OCT_ERR_INVALID_ARG
                   ? oct_error_set(err, st, -1, "scheduler: sampling parameters out of range")
                   : oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    }
    memcpy(q->tokens, p->prompt, (size_t)p->n_prompt * sizeof(int32_t));
    q->n_tokens = p->n_prompt;
    q->p.prompt = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        seq_free(q);
        return oct_error_set(err, OCT_ERR_CANCELLED, -1, "the server is shutting down");
    }
    if (s->n_in + s->eng_waiting >= s->o.max_waiting) {
        pthread_mutex_unlock(&s->mu);
        seq_free(q);
        return oct_error_set(err, OCT_ERR_LIMIT, -1, "too many queued requests (%lld)",
                             (long long)s->o.max_waiting);
    }
    q->order = s->next_order++;
    if (s->in_tail)
        s->in_tail->next = q;
    else
        s->in_head = q;
    s->in_tail = q;
    s->n_in++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return OCT_OK;
}

void oct_sched_cancel(oct_sched *s, uint64_t group)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->n_cancels == s->cap_cancels) {
        int64_t cap = s->cap_cancels ? s->cap_cancels * 2 : 16;
        uint64_t *c = oct_realloc(s->cancels, (size_t)cap * sizeof(uint64_t));
        if (c) {
            s->cancels = c;
            s->cap_cancels = cap;
        }
    }
    if (s->n_cancels < s->cap_cancels)
        s->cancels[s->n_cancels++] = group;
    else
        OCT_ERROR("scheduler: out of memory recording a cancellation");
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void oct_sched_get_stats(oct_sched *s, oct_sched_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    pthread_mutex_unlock(&s->mu);
}

void oct_sched_free(oct_sched *s)
{
    if (!s)
        return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    /* Sequences submitted after the thread's last look (none once stop is
     * set, but a failed create may leave some). */
    seq *q = s->in_head;
    while (q) {
        seq *nx = q->next;
        if (q->p.on_done)
            q->p.on_done(q->p.user, OCT_FINISH_CANCELLED, 0, NULL);
        seq_free(q);
        q = nx;
    }
    oct_session_free(s->sess);
    oct_free(s->eos);
    oct_free(s->running);
    oct_free(s->scratch);
    oct_free(s->logits);
    oct_free(s->cancels);
    oct_free(s->b_tok);
    oct_free(s->b_seq);
    oct_free(s->b_pos);
    oct_free(s->b_want);
    oct_free(s->b_owner);
    oct_free(s->b_req);
    oct_free(s->b_ids);
    oct_free(s->b_lp);
    oct_free(s->b_host);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    oct_free(s);
}
