/* device.c — which device a model runs on (--device, vLLM's flag) and the
 * model constants its backend keeps.
 *
 *   auto  the CUDA device when octet was built with CUDA and a GPU is
 *         present; else the CPU.  OCTET_DEVICE=cpu|cuda overrides it.
 *   cuda  the whole forward pass on GPU 0: every linear layer through the
 *         CUDA kernels (FP8: cuda_fp8; unquantized: cuda_bf16), MoE experts
 *         through the grouped GEMM (--moe-backend auto | cuda | cuda_grouped),
 *         the KV cache
 *         in bf16 (auto / float32) or E4M3, decode steps in CUDA graphs
 *         unless --enforce-eager.  Anything the device cannot run
 *         is an error naming it, never a silent host run.
 *   cpu   the host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kernels/cuda/backend_cuda.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/linear.h"
#include "model/model.h"

/* "cuda" or "cpu" for opts. */
static oct_status pick(const char *want, bool *cuda, oct_error *err)
{
    const char *env = getenv("OCTET_DEVICE");
    if ((!want || !*want || strcmp(want, "auto") == 0) && env && *env)
        want = env;
    if (!want || !*want || strcmp(want, "auto") == 0) {
        *cuda = oct_cuda_available();
        return OCT_OK;
    }
    if (strcmp(want, "cpu") == 0 || strcmp(want, "cuda") == 0) {
        *cuda = strcmp(want, "cuda") == 0;
        return OCT_OK;
    }
    return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "--device %s: expected auto, cuda or cpu",
                         want);
}

/* --moe-backend against the device: the GPU's MoE block runs its grouped
 * GEMM; on the host the experts take the kernels named (their selector
 * resolves "cpu", "avx512", ...; "cuda" runs each expert through the device
 * and back, as --linear-backend cuda does). */
static oct_status moe_backend(oct_model_opts *eff, bool cuda, bool moe, oct_error *err)
{
    static const char *k_names[] = {"auto", "cuda", "cuda_grouped", "cpu", "avx512", "avx2", "ref"};
    const char *mb = eff->moe_backend;
    bool known = !mb || !*mb;
    for (size_t i = 0; !known && i < OCT_ARRAY_LEN(k_names); i++)
        known = strcmp(mb, k_names[i]) == 0;
    if (!known)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "--moe-backend %s: expected auto, cuda, cuda_grouped, cpu, avx512, "
                             "avx2 or ref",
                             mb);
    const bool dflt = !mb || !*mb || strcmp(mb, "auto") == 0 || !moe; /* dense: no experts */
    const bool device = !dflt && (strcmp(mb, "cuda") == 0 || strcmp(mb, "cuda_grouped") == 0);
    if (cuda && !dflt && !device)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "--moe-backend %s runs on the host: use --device cpu with it", mb);
    if (!cuda && !dflt && strcmp(mb, "cuda_grouped") == 0)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "--moe-backend cuda_grouped is the GPU's MoE block: use --device "
                             "cuda with it%s",
                             oct_cuda_available() ? "" : " (no CUDA device here)");
    if (cuda)
        eff->moe_backend = "cuda";
    else if (dflt)
        eff->moe_backend = NULL; /* as --linear-backend */
    return OCT_OK;
}

oct_status oct_model_device(const char *dir, const oct_model_opts *opts, oct_model_opts *eff,
                            oct_backend **be, oct_error *err)
{
    *eff = opts ? *opts : (oct_model_opts){0};
    *be = oct_backend_cpu();
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    oct_model_config cfg;
    oct_status st = oct_model_config_load(path, &cfg, err);
    bool cuda = false;
    if (st == OCT_OK)
        st = pick(eff->device, &cuda, err);
    if (st == OCT_OK)
        st = moe_backend(eff, cuda, cfg.n_experts > 0, err);
    if (st != OCT_OK || !cuda)
        return st;
    const char *lb = eff->linear_backend;
    if (lb && *lb && strcmp(lb, "auto") != 0 && strcmp(lb, "cuda") != 0)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "--linear-backend %s runs on the host: use --device cpu with it", lb);
    eff->linear_backend = "cuda";
    const char *kv = eff->kv_cache_dtype;
    if (kv && strcmp(kv, "fp8_e5m2") == 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "--device cuda: --kv-cache-dtype fp8_e5m2 is not implemented on the "
                             "GPU (bf16, fp8 / fp8_e4m3 are)");
    if (!kv || !*kv || strcmp(kv, "auto") == 0 || strcmp(kv, "float32") == 0 ||
        strcmp(kv, "f32") == 0)
        eff->kv_cache_dtype = "bf16";
    return oct_backend_cuda_create(0, eff->enforce_eager, be, err);
}

uint64_t oct_model_device_used(const oct_model *m)
{
    size_t free_b = 0, total = 0;
    if (m->be == oct_backend_cpu() || oct_cuda_mem_info(&free_b, &total) != OCT_OK)
        return 0;
    return (uint64_t)(total - free_b);
}

oct_status oct_model_adopt_constants(oct_model *m, oct_error *err)
{
    const oct_backend_ops *op = m->be->ops;
    oct_backend *be = m->be;
    const oct_arch *a = &m->arch;
    oct_status st;
    if ((st = op->adopt_embed(be, m->embed, a->vocab, a->hidden, err)) ||
        (st = op->adopt(be, m->final_norm, a->hidden, err)) ||
        (st = op->adopt(be, a->inv_freq, a->head_dim / 2, err)))
        return st;
    for (int64_t l = 0; l < a->n_layers; l++) {
        const oct_layer_weights *lw = &m->layers[l];
        if ((st = op->adopt(be, lw->attn_norm, a->hidden, err)) ||
            (st = op->adopt(be, lw->mlp_norm, a->hidden, err)) ||
            (st = op->adopt(be, lw->q_norm, a->head_dim, err)) ||
            (st = op->adopt(be, lw->k_norm, a->head_dim, err)))
            return st;
    }
    return OCT_OK;
}

/* "model.layers.0.mlp.experts" from an expert layer's name. */
static void block_name(const oct_linear *l, char *out, size_t len)
{
    const char *name = l && l->name ? l->name : "experts";
    const char *e = strstr(name, ".experts");
    int n = e ? (int)(e - name) + 8 : (int)strlen(name);
    snprintf(out, len, "%.*s", n, name);
}

oct_status oct_model_moe_kernels(const oct_model *m, oct_error *err)
{
    const oct_arch *a = &m->arch;
    if (a->moe == OCT_MOE_NONE || !m->be->ops->moe_kernel)
        return OCT_OK;
    char first[200] = "", scheme[200] = "", cur[200];
    const char *kernel = NULL;
    int64_t same = 0;
    for (int64_t l = 0; l <= a->n_layers; l++) {
        const char *k = NULL;
        if (l < a->n_layers) {
            const oct_layer_weights *lw = &m->layers[l];
            const oct_moe_block b = {lw->router, lw->experts,         a->n_experts, a->top_k,
                                     a->hidden,  a->moe_intermediate, a->norm_topk};
            oct_status st = m->be->ops->moe_kernel(m->be, &b, &k, cur, sizeof cur, err);
            if (st != OCT_OK)
                return st;
            if (kernel && strcmp(k, kernel) == 0 && strcmp(cur, scheme) == 0) {
                same++;
                continue;
            }
        }
        if (kernel && same > 0)
            OCT_INFO("Selected %s for %s and %lld more MoE layers (%s)", kernel, first,
                     (long long)same, scheme);
        else if (kernel)
            OCT_INFO("Selected %s for %s (%s)", kernel, first, scheme);
        if (l < a->n_layers) {
            kernel = k;
            same = 0;
            snprintf(scheme, sizeof scheme, "%s", cur);
            block_name(m->layers[l].experts[0].gate_up[0], first, sizeof first);
        }
    }
    return OCT_OK;
}
