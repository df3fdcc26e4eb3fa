/* device.c — which device a model runs on (--device, vLLM's flag) and the
 * model constants its backend keeps.
 *
 *   auto  the CUDA device when octet was built with CUDA, a GPU is present and
 *         the model has no MoE layers (they run on the host until the device
 *         has MoE ops); else the CPU.  OCTET_DEVICE=cpu|cuda overrides it.
 *   cuda  the whole forward pass on GPU 0: every linear layer through the
 *         CUDA kernels (FP8: cuda_fp8; unquantized: cuda_bf16), the KV cache
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
#include "model/model.h"

/* "cuda" or "cpu" for opts and the model's config. */
static oct_status pick(const char *want, const oct_model_config *cfg, bool *cuda, oct_error *err)
{
    const char *env = getenv("OCTET_DEVICE");
    if ((!want || !*want || strcmp(want, "auto") == 0) && env && *env)
        want = env;
    if (!want || !*want || strcmp(want, "auto") == 0) {
        *cuda = oct_cuda_available() && cfg->n_experts == 0;
        return OCT_OK;
    }
    if (strcmp(want, "cpu") == 0 || strcmp(want, "cuda") == 0) {
        *cuda = strcmp(want, "cuda") == 0;
        if (*cuda && cfg->n_experts > 0)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "--device cuda: %s has MoE layers, which run on the CPU only "
                                 "(use --device cpu)",
                                 cfg->architecture);
        return OCT_OK;
    }
    return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "--device %s: expected auto, cuda or cpu",
                         want);
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
        st = pick(eff->device, &cfg, &cuda, err);
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
