/* half.c — bf16 and IEEE fp16 <-> f32 (scalar, exact widening, RNE narrowing). */
#include <math.h>
#include <string.h>

#include "core/core.h"

float oct_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

uint16_t oct_f32_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if (isnan(x))
        return (uint16_t)((u >> 16) | 0x40u); /* keep sign, force a quiet NaN */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float oct_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x3FFu;
    float v;
    if (e == 0x1F) {
        uint32_t u = sign | 0x7F800000u | (m << 13);
        memcpy(&v, &u, sizeof v);
        return v;
    }
    if (e == 0)
        v = ldexpf((float)m, -24);
    else
        v = ldexpf((float)(m | 0x400u), (int)e - 25);
    return sign ? -v : v;
}

uint16_t oct_f32_to_f16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (isnan(x))
        return (uint16_t)(sign | 0x7E00u);
    double a = fabs((double)x);
    if (a >= 65520.0) /* rounds to Inf */
        return (uint16_t)(sign | 0x7C00u);
    if (a == 0.0)
        return sign;
    int e2;
    frexp(a, &e2);
    int e = e2 - 1 < -14 ? -14 : e2 - 1;
    double n = nearbyint(a / ldexp(1.0, e - 10));
    double val = n * ldexp(1.0, e - 10);
    if (val == 0.0)
        return sign;
    int ve2;
    double fr = frexp(val, &ve2);
    if (ve2 - 1 < -14)
        return (uint16_t)(sign | (uint16_t)ldexp(val, 24));
    uint32_t E = (uint32_t)(ve2 - 1 + 15);
    uint32_t man = (uint32_t)ldexp(fr * 2.0 - 1.0, 10);
    return (uint16_t)(sign | (E << 10) | man);
}
