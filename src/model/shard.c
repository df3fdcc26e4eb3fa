/* shard.c — tensor-parallel shards of a plan's units (shard.h). */
#include "model/shard.h"

#include <stdio.h>
#include <string.h>

#include "kernels/linear.h"

int64_t oct_shard_kv_heads(int64_t n_kv, int tp, int rank, int64_t *first, oct_error *err)
{
    *first = 0;
    if (tp < 1 || rank < 0 || rank >= tp || n_kv < 1) {
        oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "rank %d of %d, %lld KV heads", rank, tp,
                      (long long)n_kv);
        return 0;
    }
    if (n_kv % tp == 0) {
        *first = rank * (n_kv / tp);
        return n_kv / tp;
    }
    if (tp % n_kv == 0) { /* fewer KV heads than ranks: each on tp / n_kv ranks */
        *first = rank / (tp / n_kv);
        return 1;
    }
    oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                  "%lld KV heads cannot be split over %d ranks (one must divide the other)",
                  (long long)n_kv, tp);
    return 0;
}

oct_range oct_shard_vocab(int64_t vocab, int tp, int rank)
{
    const int64_t per = oct_ceil_div(vocab, tp), lo = OCT_MIN(vocab, rank * per);
    return (oct_range){lo, OCT_MIN(vocab, lo + per)};
}

/* Rank's equal part [rank * w / tp, ...) of w, offset by base; an error
 * naming `what` when tp does not divide w. */
static oct_status part_of(const char *layer, const char *what, int64_t w, int64_t base, int tp,
                          int rank, oct_range *r, oct_error *err)
{
    if (w % tp != 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s: %s (%lld) is not divisible by --tensor-parallel-size %d", layer,
                             what, (long long)w, tp);
    *r = (oct_range){base + rank * (w / tp), base + (rank + 1) * (w / tp)};
    return OCT_OK;
}

/* q, k and v rows of a fused [q | k | v] weight. */
static oct_status qkv_rows(const oct_plan_unit *u, const oct_arch *a, int tp, int rank,
                           oct_shard *s, oct_error *err)
{
    const int64_t d = a->head_dim, q = a->n_heads * d, kv = a->n_kv_heads * d;
    if (u->n != q + 2 * kv)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s: %lld rows are not %lld query and 2 x %lld KV head rows", u->name,
                             (long long)u->n, (long long)a->n_heads, (long long)a->n_kv_heads);
    oct_status st =
        part_of(u->name, "the number of query heads", a->n_heads, 0, tp, rank, &s->out[0], err);
    if (st != OCT_OK)
        return st;
    s->out[0].lo *= d;
    s->out[0].hi *= d;
    int64_t first = 0;
    const int64_t heads = oct_shard_kv_heads(a->n_kv_heads, tp, rank, &first, err);
    if (heads == 0) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        return oct_error_set(err, err->status, -1, "%s: %s", u->name, why);
    }
    s->out[1] = (oct_range){q + first * d, q + (first + heads) * d};
    s->out[2] = (oct_range){q + kv + first * d, q + kv + (first + heads) * d};
    s->n_out = 3;
    return OCT_OK;
}

/* The weight rows or columns of u on rank (scales not yet). */
static oct_status weight_part(const oct_plan_unit *u, const oct_arch *a, int tp, int rank,
                              oct_shard *s, oct_error *err)
{
    const bool expert = u->role == OCT_U_EXP_GATE_UP || u->role == OCT_U_EXP_DOWN;
    const int64_t I = expert ? a->moe_intermediate : a->intermediate;
    s->out[0] = (oct_range){0, u->n};
    s->n_out = 1;
    s->in = (oct_range){0, u->k};
    s->split = OCT_SPLIT_OUT;
    switch (u->role) {
    case OCT_U_QKV: return qkv_rows(u, a, tp, rank, s, err);
    case OCT_U_GATE_UP:
    case OCT_U_EXP_GATE_UP: {
        if (u->n != 2 * I)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s: %lld rows are not gate and up of %lld", u->name,
                                 (long long)u->n, (long long)I);
        s->n_out = 2;
        oct_status st = part_of(u->name, "the intermediate size", I, 0, tp, rank, &s->out[0], err);
        return st != OCT_OK
                   ? st
                   : part_of(u->name, "the intermediate size", I, I, tp, rank, &s->out[1], err);
    }
    case OCT_U_O: {
        s->split = OCT_SPLIT_IN;
        oct_status st =
            part_of(u->name, "the number of query heads", a->n_heads, 0, tp, rank, &s->in, err);
        s->in.lo *= a->head_dim;
        s->in.hi *= a->head_dim;
        return st;
    }
    case OCT_U_DOWN:
    case OCT_U_EXP_DOWN:
        s->split = OCT_SPLIT_IN;
        return part_of(u->name, "the intermediate size", I, 0, tp, rank, &s->in, err);
    default: s->split = OCT_SPLIT_NONE; return OCT_OK;
    }
}

/* A range in units of blocks of b, which its edges must not cut (an edge at
 * `end`, the dimension's end, may). */
static oct_status block_range(const char *layer, const char *what, oct_range r, int64_t b,
                              int64_t end, int tp, oct_range *out, oct_error *err)
{
    if (r.lo % b != 0 || (r.hi % b != 0 && r.hi != end))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s: --tensor-parallel-size %d gives a rank %s [%lld, %lld), which "
                             "cuts the %lld-wide weight-scale blocks",
                             layer, tp, what, (long long)r.lo, (long long)r.hi, (long long)b);
    *out = (oct_range){r.lo / b, oct_ceil_div(r.hi, b)};
    return OCT_OK;
}

/* The scales' ranges of a weight part. */
static oct_status scale_part(const oct_plan_unit *u, oct_shard *s, int tp, oct_error *err)
{
    const oct_scale_kind kind = u->desc.weight_scale;
    s->n_sc_out = s->n_out;
    s->sc_in = (oct_range){0, 1};
    if (u->desc.weight_type != OCT_WEIGHT_FP8 || kind == OCT_SCALE_TENSOR) { /* shared */
        s->n_sc_out = 1;
        s->sc_out[0] = (oct_range){0, u->desc.weight_type == OCT_WEIGHT_FP8};
        if (u->desc.weight_type != OCT_WEIGHT_FP8)
            s->n_sc_out = 0;
        return OCT_OK;
    }
    const int64_t rb = kind == OCT_SCALE_BLOCK128 ? 128 : 1, cb = oct_scale_kblock(kind);
    for (int i = 0; i < s->n_out; i++) {
        oct_status st =
            block_range(u->name, "output rows", s->out[i], rb, u->n, tp, &s->sc_out[i], err);
        if (st != OCT_OK)
            return st;
    }
    if (kind == OCT_SCALE_ROW)
        return OCT_OK;
    return block_range(u->name, "input columns", s->in, cb, u->k, tp, &s->sc_in, err);
}

/* Ranges that meet become one (one rank: the whole fused weight). */
static void merge_ranges(oct_shard *s)
{
    int n = 0;
    for (int i = 0; i < s->n_out; i++)
        if (n > 0 && s->out[n - 1].hi == s->out[i].lo)
            s->out[n - 1].hi = s->out[i].hi;
        else
            s->out[n++] = s->out[i];
    s->n_out = n;
}

oct_status oct_shard_unit(const oct_plan_unit *u, const oct_arch *a, int tp, int rank,
                          oct_shard *out, oct_error *err)
{
    memset(out, 0, sizeof *out);
    if (tp < 1 || rank < 0 || rank >= tp)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "rank %d of --tensor-parallel-size %d",
                             rank, tp);
    oct_status st = weight_part(u, a, tp, rank, out, err);
    if (st != OCT_OK)
        return st;
    merge_ranges(out);
    return scale_part(u, out, tp, err);
}

oct_status oct_shard_check_plan(const oct_plan *p, int tp, oct_error *err)
{
    uint64_t bytes = 0;
    return oct_plan_tensor_parallel(p, tp, &bytes, err);
}

/* The bytes of u that s holds. */
static uint64_t shard_bytes(const oct_plan_unit *u, const oct_shard *s)
{
    int64_t rows = 0;
    for (int i = 0; i < s->n_out; i++)
        rows += s->out[i].hi - s->out[i].lo;
    const double part =
        (double)rows * (double)(s->in.hi - s->in.lo) / ((double)u->n * (double)u->k);
    return (uint64_t)((double)u->bytes * part + 0.5);
}

oct_status oct_plan_tensor_parallel(const oct_plan *p, int tp, uint64_t *rank_bytes, oct_error *err)
{
    *rank_bytes = 0;
    if (!p || tp < 1 || tp > 4096)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "--tensor-parallel-size %d", tp);
    for (int r = 0; r < tp; r++) {
        uint64_t bytes = 0;
        for (int64_t i = 0; i < p->n_units; i++) {
            oct_shard s;
            oct_status st = oct_shard_unit(&p->units[i], &p->arch, tp, r, &s, err);
            if (st != OCT_OK)
                return st;
            bytes += shard_bytes(&p->units[i], &s);
        }
        *rank_bytes = OCT_MAX(*rank_bytes, bytes);
    }
    return OCT_OK;
}
