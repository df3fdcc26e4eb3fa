/* metrics.c — quantization error measures used by tests, eval and the demo. */
#include <math.h>

#include "core/core.h"

oct_status oct_quant_error_measure(const float *ref, const float *approx, size_t n,
                                   oct_quant_error *out)
{
    if (!out || (n && (!ref || !approx)))
        return OCT_ERR_INVALID_ARG;
    double sig = 0.0, noise = 0.0, mx = 0.0;
    for (size_t i = 0; i < n; i++) {
        double r = (double)ref[i], e = r - (double)approx[i];
        sig += r * r;
        noise += e * e;
        double a = fabs(e);
        if (a > mx || a != a)
            mx = a;
    }
    out->max_abs = mx;
    out->sqnr_db = noise == 0.0 ? (double)INFINITY : 10.0 * log10(sig / noise);
    out->rel_fro = sig == 0.0 ? (noise == 0.0 ? 0.0 : (double)INFINITY) : sqrt(noise / sig);
    return OCT_OK;
}
