/* wfplan.cu: water-filling (Fathom) and top-r (SparQ) plans on the GPU.
 *
 * One block per KV head, one thread per candidate (channel j, bit b): the
 * 512 candidates are sorted in shared memory by a bitonic sort on a key that
 * encodes the ranking of wfplan.h (value descending, then j, then b), the
 * first budget are taken, and warp 0 writes the plan. A few microseconds,
 * bound by latency (45 barrier-separated stages), not by bytes or arithmetic.
 */
#include "kbench/kb.h"
#include "kern.h"
#include "ref/wfplan.h"

#define NCAND (KREF_D * KREF_QBITS)

__global__ void __launch_bounds__(NCAND)
wf_plan_kernel1(const float *__restrict__ q, int g, const float *__restrict__ sigma2, int budget,
                int decay, int T, kref_plan_t *plans)
{
    __shared__ float e[KREF_D];
    __shared__ unsigned long long key[NCAND];
    __shared__ unsigned cnt[KREF_D];
    int h = blockIdx.x, t = threadIdx.x, j = t / KREF_QBITS, b = t % KREF_QBITS;
    if (t < KREF_D) {
        const float *qh = q + (size_t)h * g * KREF_D;
        float acc = 0.0f;
        for (int i = 0; i < g; i++)   /* same rounding as the C reference: no FMA */
            acc = __fadd_rn(acc, __fmul_rn(qh[i * KREF_D + t], qh[i * KREF_D + t]));
        e[t] = __fmul_rn(acc, sigma2[t]);
        cnt[t] = 0;
    }
    __syncthreads();
    /* values are >= 0, so their bits order like the floats; the low word
     * puts lower (j, b) first among equal values */
    float v = kref_wf_value(e[j], b, decay);
    key[t] = ((unsigned long long)__float_as_uint(v) << 32) | (unsigned)(NCAND - 1 - t);
    __syncthreads();
    for (int k = 2; k <= NCAND; k <<= 1)          /* bitonic sort, descending */
        for (int jj = k >> 1; jj > 0; jj >>= 1) {
            int p = t ^ jj;
            if (p > t) {
                unsigned long long x = key[t], y = key[p];
                bool down = (t & k) == 0;
                if (down ? x < y : x > y) {
                    key[t] = y;
                    key[p] = x;
                }
            }
            __syncthreads();
        }
    if (t < budget)
        atomicAdd(&cnt[(NCAND - 1 - (unsigned)(key[t] & 0xffffffffu)) / KREF_QBITS], 1u);
    __syncthreads();
    if (t < 32) {                          /* warp 0: lane l owns channels 4l..4l+3 */
        kref_plan_t *p = plans + h;
        int cnt4[4], na = 0;
        uint32_t bytes = 0;
        for (int i = 0; i < 4; i++) {
            cnt4[i] = (int)cnt[4 * t + i];
            na += cnt4[i] > 0;
            bytes += cnt4[i] ? (uint32_t)kref_prefix_bytes(T, cnt4[i]) : 0u;
        }
        int na_before = na;
        uint32_t b_before = bytes;
        for (int o = 1; o < 32; o *= 2) {  /* inclusive prefix sums over lanes */
            int vn = __shfl_up_sync(0xffffffffu, na_before, o);
            uint32_t vb = __shfl_up_sync(0xffffffffu, b_before, o);
            if (t >= o) {
                na_before += vn;
                b_before += vb;
            }
        }
        int a = na_before - na;
        uint32_t cum = b_before - bytes;
        for (int i = 0; i < 4; i++)
            if (cnt4[i]) {
                p->chan[a] = (uint8_t)(4 * t + i);
                p->depth[a] = (uint8_t)cnt4[i];
                p->cum[a] = cum;
                cum += (uint32_t)kref_prefix_bytes(T, cnt4[i]);
                a++;
            }
        int total = __shfl_sync(0xffffffffu, na_before, 31);
        for (int e = total + t; e < KREF_D; e += 32) {   /* the plan is fully defined */
            p->chan[e] = 0;
            p->depth[e] = 0;
            p->cum[e] = 0;
        }
        if (t == 31) {
            p->n_active = total;
            p->chunk_prefix_bytes = (int32_t)b_before;
        }
    }
}

void kb_wf_plan(const float *q, int g, const float *sigma2, int heads, int budget, int decay,
                int T, kref_plan_t *plan, cudaStream_t s)
{
    wf_plan_kernel1<<<heads, NCAND, 0, s>>>(q, g, sigma2, budget, decay, T, plan);
    CKL();
}
