/* planes.c: C reference of the Fathom / SparQ index (see planes.h). */
#include "planes.h"

void kref_plan_from_depth(const uint8_t depth[KREF_D], int T, kref_plan_t *plan)
{
    memset(plan, 0, sizeof *plan);
    uint32_t cum = 0;
    for (int j = 0; j < KREF_D; j++) {
        if (depth[j] == 0)
            continue;
        int a = plan->n_active++;
        plan->chan[a] = (uint8_t)j;
        plan->depth[a] = depth[j];
        plan->cum[a] = cum;
        cum += (uint32_t)kref_prefix_bytes(T, depth[j]);
    }
    plan->chunk_prefix_bytes = (int32_t)cum;
}

static float block_maxabs(const uint16_t *k, size_t t0, int j)
{
    float m = 0.0f;
    for (size_t t = t0; t < t0 + KREF_SCALE_TOKENS; t++) {
        float v = fabsf(kref_bf16_to_f32(k[t * KREF_D + j]));
        if (v > m)
            m = v;
    }
    return m;
}

void kref_planes_quantize(const uint16_t *k, size_t n, int T, uint8_t *out)
{
    size_t chan_b = kref_chan_bytes(T);
    memset(out, 0, n / T * kref_chunk_bytes(T));
    for (size_t c = 0; c < n / T; c++) {
        for (int j = 0; j < KREF_D; j++) {
            uint8_t *piece = out + c * kref_chunk_bytes(T) + j * chan_b;
            for (int b = 0; b < T / KREF_SCALE_TOKENS; b++) {
                size_t t0 = c * T + (size_t)b * KREF_SCALE_TOKENS;
                uint16_t sh = kref_quant_scale(block_maxabs(k, t0, j));
                memcpy(piece + 2 * b, &sh, 2);
                float s = kref_f16_to_f32(sh);
                for (int i = 0; i < KREF_SCALE_TOKENS; i++) {
                    int u = kref_quant_code(kref_bf16_to_f32(k[(t0 + i) * KREF_D + j]), s);
                    int bit = b * KREF_SCALE_TOKENS + i;
                    for (int p = 0; p < KREF_QBITS; p++)
                        if ((u >> (3 - p)) & 1)
                            piece[T / 32 + p * T / 8 + bit / 8] |= (uint8_t)(1u << (bit % 8));
                }
            }
        }
    }
}

float kref_planes_read(const uint8_t *idx, int T, size_t token, int chan, int t)
{
    const uint8_t *piece = idx + token / T * kref_chunk_bytes(T) + chan * kref_chan_bytes(T);
    int i = (int)(token % T);
    uint16_t sh;
    memcpy(&sh, piece + 2 * (i / KREF_SCALE_TOKENS), 2);
    int u = 0;
    for (int p = 0; p < KREF_QBITS; p++)
        u = (u << 1) | ((piece[T / 32 + p * T / 8 + i / 8] >> (i % 8)) & 1);
    return kref_dequant(u, t, kref_f16_to_f32(sh));
}

void kref_fathom_scan(const uint8_t *idx, size_t n, int T, const float *q,
                      const uint8_t depth[KREF_D], float *scores)
{
    for (size_t i = 0; i < n; i++) {
        double acc = 0.0;
        for (int j = 0; j < KREF_D; j++)
            if (depth[j])
                acc += (double)q[j] * kref_planes_read(idx, T, i, j, depth[j]);
        scores[i] = (float)acc;
    }
}

void kref_planes_compact(const uint8_t *idx, size_t n, int T, const kref_plan_t *plan,
                         uint8_t *out)
{
    size_t chunks = n / T;
    for (int a = 0; a < plan->n_active; a++) {
        size_t pb = kref_prefix_bytes(T, plan->depth[a]);
        for (size_t c = 0; c < chunks; c++)
            memcpy(out + chunks * plan->cum[a] + c * pb,
                   idx + c * kref_chunk_bytes(T) + plan->chan[a] * kref_chan_bytes(T), pb);
    }
}
