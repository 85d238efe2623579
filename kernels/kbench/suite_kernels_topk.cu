/* suite_kernels_topk.cu: the kernels suite's radix top-k rows over n, k and rows. */
#include "kern.h"
#include "misc.h"
#include "suite_kernels.h"
#include "ref/topk.h"

#define TOPK_ROWS_MAX 512     /* rows of the many-rows top-k cases */
#define TOPK_MANY_NMAX 262144

/* One top-k row: the k largest of each of rows rows of n scores, cold. */
static void topk_row(ks_t *K, const float *x, int rows, size_t n, int k, uint32_t *idx,
                     kb_topk_ws_t *ws)
{
    kb_stats_t st = time_it(K, [&](cudaStream_t s) {
        kb_topk(x, rows, n, k, idx, ws, s);
    }, 20 + n / 1e3, 1);
    kb_row_t r = kb_row("topk", "radix");
    r.n_tokens = (long long)n;
    r.heads = rows;
    r.k = k;
    r.placement = "hbm";
    r.bytes_moved = 4.0 * rows * n * (KREF_TOPK_PASSES + 1);
    r.ref_gbps = kb_ceil.hbm_gbps;
    ks_put(K, &r, st, (double)rows * n);
}

void ks_sec_topk(ks_t *K)
{
    size_t nmax = K->o->quick ? (1u << 20) : (16u << 20);
    int rows_max = HEADS * QGROUP;
    /* room for the grid below and for TOPK_ROWS_MAX rows at TOPK_MANY_NMAX
     * (the quick grid's 8 x 1M is smaller) */
    size_t xn = HEADS * nmax, many = (size_t)TOPK_ROWS_MAX * TOPK_MANY_NMAX;
    xn = xn < many ? many : xn;
    float *x = (float *)ks_dalloc(xn * 4);
    kb_make_normal(x, xn, 3.0f, 31, K->s);
    uint32_t *idx = (uint32_t *)ks_dalloc(TOPK_ROWS_MAX * 4096 * 4);
    kb_topk_ws_t *ws = kb_topk_ws_new(TOPK_ROWS_MAX, xn);
    int ks[] = {64, 256, 1024, 2048, 4096};
    for (size_t n = 4096; n <= nmax; n *= 4)
        for (int ki = 0; ki < 5; ki++) {
            int k = ks[ki], rows = HEADS;
            if ((size_t)k > n || (K->o->quick && ki % 2))
                continue;
            for (int pass = 0; pass < 2; pass++) {
                if (pass && (n != (1u << 20) || k != 2048))
                    continue;
                rows = pass ? rows_max : HEADS;      /* per query head (HashAttention) */
                if ((size_t)rows * n > HEADS * nmax)
                    continue;
                topk_row(K, x, rows, n, k, idx, ws);
            }
        }
    /* many rows at small n: rows x n up to 128M scores, the radix top-k's
     * element-throughput regime, while n stays <= 256K tokens; past the L2, the
     * same scores per block (1-8 blocks a row) over 64-512 rows, which the
     * time per row (its histogram passes) needs apart from the time per score */
    static const size_t mn[] = {65536, 131072, TOPK_MANY_NMAX};
    static const int mrows[] = {32, 64, 128, 256, TOPK_ROWS_MAX}, mk[] = {256, 2048};
    for (int ni = 0; ni < 3; ni++)
        for (int ri = 0; ri < 5; ri++)
            for (int ki = 0; ki < 2; ki++)
                topk_row(K, x, mrows[ri], mn[ni], mk[ki], idx, ws);
    kb_topk_ws_free(ws);
    CK(cudaFree(x));
    CK(cudaFree(idx));
}
