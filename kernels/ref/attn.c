/* attn.c: C reference of decode attention. */
#include <float.h>
#include "attn.h"

static double dot_row(const float *q, const uint16_t *k)
{
    double s = 0.0;
    for (int j = 0; j < KREF_D; j++)
        s += (double)q[j] * kref_bf16_to_f32(k[j]);
    return s;
}

void kref_attn(const float *q, int g, const uint16_t *k, const uint16_t *v, size_t stride,
               size_t n, float *out)
{
    for (int h = 0; h < g; h++) {
        const float *qh = q + h * KREF_D;
        double m = -DBL_MAX, l = 0.0, acc[KREF_D] = {0};
        for (size_t r = 0; r < n; r++) {
            double s = dot_row(qh, k + r * stride);
            m = s > m ? s : m;
        }
        for (size_t r = 0; r < n; r++) {
            double w = exp(dot_row(qh, k + r * stride) - m);
            l += w;
            for (int j = 0; j < KREF_D; j++)
                acc[j] += w * kref_bf16_to_f32(v[r * stride + j]);
        }
        for (int j = 0; j < KREF_D; j++)
            out[h * KREF_D + j] = (float)(acc[j] / l);
    }
}

void kref_attn_partial(const float *q, int g, const uint16_t *k, const uint16_t *v,
                       size_t stride, size_t r0, size_t r1, kref_attn_part_t *part)
{
    for (int h = 0; h < g; h++) {
        const float *qh = q + h * KREF_D;
        double m = -DBL_MAX, l = 0.0, acc[KREF_D] = {0};
        for (size_t r = r0; r < r1; r++) {
            double s = dot_row(qh, k + r * stride);
            m = s > m ? s : m;
        }
        for (size_t r = r0; r < r1; r++) {
            double w = exp(dot_row(qh, k + r * stride) - m);
            l += w;
            for (int j = 0; j < KREF_D; j++)
                acc[j] += w * kref_bf16_to_f32(v[r * stride + j]);
        }
        part[h].m = (float)m;
        part[h].l = (float)l;
        for (int j = 0; j < KREF_D; j++)
            part[h].acc[j] = (float)acc[j];
    }
}

void kref_attn_combine(const kref_attn_part_t *parts, int nsplit, int g, float *out)
{
    for (int h = 0; h < g; h++) {
        double M = -DBL_MAX, L = 0.0, acc[KREF_D] = {0};
        for (int s = 0; s < nsplit; s++)
            M = parts[s * g + h].m > M ? parts[s * g + h].m : M;
        for (int s = 0; s < nsplit; s++) {
            const kref_attn_part_t *p = &parts[s * g + h];
            double w = exp((double)p->m - M);
            L += w * p->l;
            for (int j = 0; j < KREF_D; j++)
                acc[j] += w * p->acc[j];
        }
        for (int j = 0; j < KREF_D; j++)
            out[h * KREF_D + j] = (float)(acc[j] / L);
    }
}
