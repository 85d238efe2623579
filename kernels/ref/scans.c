/* scans.c: C references of the per-token, Hamming and landmark scans. */
#include "scans.h"
#include "planes.h"

void kref_pt_build(const uint16_t *k, size_t n, const int *chans, int C, uint8_t *out)
{
    size_t bb = kref_pt_block_bytes(C);
    memset(out, 0, n / KREF_SCALE_TOKENS * bb);
    for (size_t blk = 0; blk < n / KREF_SCALE_TOKENS; blk++) {
        uint8_t *o = out + blk * bb;
        size_t t0 = blk * KREF_SCALE_TOKENS;
        for (int c = 0; c < C; c++) {
            float m = 0.0f;
            for (int i = 0; i < KREF_SCALE_TOKENS; i++) {
                float v = fabsf(kref_bf16_to_f32(k[(t0 + i) * KREF_D + chans[c]]));
                m = v > m ? v : m;
            }
            uint16_t sh = kref_quant_scale(m);
            memcpy(o + 2 * c, &sh, 2);
            float s = kref_f16_to_f32(sh);
            for (int i = 0; i < KREF_SCALE_TOKENS; i++) {
                int u = kref_quant_code(kref_bf16_to_f32(k[(t0 + i) * KREF_D + chans[c]]), s);
                o[2 * C + (size_t)i * (C / 2) + c / 2] |= (uint8_t)(u << (4 * (c % 2)));
            }
        }
    }
}

void kref_pt_scan(const uint8_t *idx, size_t n, int C, const float *qc, float *scores)
{
    size_t bb = kref_pt_block_bytes(C);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *o = idx + i / KREF_SCALE_TOKENS * bb;
        const uint8_t *codes = o + 2 * C + (i % KREF_SCALE_TOKENS) * (C / 2);
        double acc = 0.0;
        for (int c = 0; c < C; c++) {
            uint16_t sh;
            memcpy(&sh, o + 2 * c, 2);
            int u = (codes[c / 2] >> (4 * (c % 2))) & 15;
            acc += (double)qc[c] * kref_dequant(u, 4, kref_f16_to_f32(sh));
        }
        scores[i] = (float)acc;
    }
}

static int popcount32(uint32_t x)
{
    int c = 0;
    for (; x; x &= x - 1)
        c++;
    return c;
}

void kref_hash_scan(const uint32_t *sig, size_t n, uint32_t qsig, float *scores)
{
    for (size_t i = 0; i < n; i++)
        scores[i] = (float)(32 - popcount32(sig[i] ^ qsig));
}

void kref_lm_build(const uint16_t *k, size_t n, int P, uint8_t *out)
{
    for (size_t pg = 0; pg < n / P; pg++) {
        uint16_t *mn = (uint16_t *)(out + pg * KREF_LM_PAGE_BYTES), *mx = mn + KREF_D;
        for (int j = 0; j < KREF_D; j++) {
            uint16_t lo = k[pg * P * KREF_D + j], hi = lo;
            for (int i = 1; i < P; i++) {
                uint16_t v = k[(pg * P + i) * KREF_D + j];
                if (kref_bf16_to_f32(v) < kref_bf16_to_f32(lo))
                    lo = v;
                if (kref_bf16_to_f32(v) > kref_bf16_to_f32(hi))
                    hi = v;
            }
            mn[j] = lo;
            mx[j] = hi;
        }
    }
}

void kref_lm_scan(const uint8_t *lm, size_t npages, const float *q, float *scores)
{
    for (size_t pg = 0; pg < npages; pg++) {
        const uint16_t *mn = (const uint16_t *)(lm + pg * KREF_LM_PAGE_BYTES), *mx = mn + KREF_D;
        double acc = 0.0;
        for (int j = 0; j < KREF_D; j++) {
            double a = (double)q[j] * kref_bf16_to_f32(mn[j]);
            double b = (double)q[j] * kref_bf16_to_f32(mx[j]);
            acc += a > b ? a : b;
        }
        scores[pg] = (float)acc;
    }
}
