/* suite_kernels_after.cu: the kernels suite's after-layer rows: kernels timed with the layer's
 * GEMMs queued behind them, as a decode runs them, against the same with nothing behind. */
#include <stdio.h>
#include "kern.h"
#include "misc.h"
#include "gemm.h"
#include "suite_kernels.h"
#include "ref/scans.h"
#include "ref/topk.h"

/* Per-token 136's (kind 0) or HashAttention's (kind 1) scan of n tokens from HBM: its row with
 * layout `lay`, and the scan itself on stream s. */
static kb_row_t after_scan_row(int kind, size_t n, const char *lay)
{
    size_t phs = n / 64 * kref_pt_block_bytes(32);
    kb_row_t r = kind ? ks_scan_row("hashattn", n, 32 * QGROUP, "hbm", lay, 8.0 * HEADS * QGROUP * n)
                      : ks_scan_row("pertoken136", n, 136, "hbm", lay, HEADS * (phs + 4.0 * n));
    if (kind)
        r.qheads = QGROUP;
    return r;
}

/* The scans' queries and scores (up to nmax tokens): one per-token 136 query set, one
 * HashAttention signature per query head. */
typedef struct {
    float *sc, *qc;
    uint32_t *qsig;
} after_bufs_t;

static after_bufs_t after_bufs_new(ks_t *K, size_t nmax)
{
    after_bufs_t b;
    b.sc = (float *)ks_dalloc(HEADS * QGROUP * nmax * 4);
    b.qc = (float *)ks_dalloc(HEADS * 32 * 4);
    b.qsig = (uint32_t *)ks_dalloc(HEADS * QGROUP * 4);
    kb_make_normal(b.qc, HEADS * 32, 0.17f, 23, K->s);
    return b;
}

static void after_bufs_free(after_bufs_t *b)
{
    CK(cudaFree(b->sc));
    CK(cudaFree(b->qc));
    CK(cudaFree(b->qsig));
}

static void after_scan(ks_t *K, int kind, size_t n, const after_bufs_t *b, cudaStream_t s)
{
    if (kind)
        kb_scan_hash((const uint32_t *)K->D.d[KB_M_HASH], b->qsig, HEADS * QGROUP, n, b->sc, s);
    else
        kb_scan_pertoken(K->D.d[KB_M_PT136], n / 64 * kref_pt_block_bytes(32), 32, b->qc, HEADS, n, b->sc, s);
}

/* A kernel as a decode runs it: with the layer's four cuBLAS GEMMs (batch 1) queued behind its end
 * event (layout "<layout>;after_layer": in a decode each layer's kernels run with those GEMMs
 * queued behind them), against the same with nothing behind ("<layout>;after_flush"). Both start
 * after an L2 flush and the step suite's lead spin, so that the kernel and what follows it are
 * queued before it runs. In a step every kernel runs 0.3-1.8 us longer than the suite times it
 * alone, and the GEMMs queued behind it are what does it: right before it, with or without a spin
 * or an idle gap between, they do not (run h200-2045-next (git history, before e518637), h200-2153-gap, h200-2157-behind).
 * Per-token 136's and HashAttention's scans from HBM at 32K, 128K and 256K, and attention over
 * winners just written (a memset after the flush, untimed: as after the step's gather), 8 KV heads
 * at g = 4 and 32 query heads at g = 1, k = 2048; and the radix top-k over 8 rows at the same n,
 * k = 2048, its scores cold both ways, and with its scores rewritten from a second buffer after the
 * flush (";after_scores": a step's top-k reads the scores its scan has just written; a copy, not a
 * memset, since the select's passes depend on the values). The fit reads these rows only for the
 * after-layer terms (validation/fit.c, after_other_work). */
#define AFTER_SPIN_US 110 /* the step suite's lead spin, 100 us + U[0, 20) */
void ks_sec_after_layer(ks_t *K, queries_t *Q)
{
    const kb_model_t *m = kb_model(K->o->model);
    kb_gemm_t *g = kb_gemm_new(m, 1);
    static const size_t ns[] = {32768, 131072, 262144};
    const size_t nmax = 262144;
    after_bufs_t fb = after_bufs_new(K, nmax);
    const int k = 2048;
    size_t wb = (size_t)HEADS * QGROUP * k * 2 * KREF_D * 2;
    uint16_t *win = (uint16_t *)ks_dalloc(wb);
    float *x = (float *)ks_dalloc(8 * nmax * 4), *x2 = (float *)ks_dalloc(8 * nmax * 4);
    kb_make_normal(x2, 8 * nmax, 3.0f, 31, K->s);
    CK(cudaMemcpyAsync(x, x2, 8 * nmax * 4, cudaMemcpyDeviceToDevice, K->s));
    uint32_t *idx = (uint32_t *)ks_dalloc(8 * k * 4);
    kb_topk_ws_t *ws = kb_topk_ws_new(8, 8 * nmax);
    static const char *const what[3] = {"after_flush", "after_layer", "after_scores"};
    for (int w = 0; w < 3; w++) {
        /* prep's work (untimed) ends in the lead spin, during which the host queues the rest */
        auto spun = [](auto work) {
            return [work](cudaStream_t s) {
                kb_l2_flush(s);
                work(s);
                kb_spin(AFTER_SPIN_US, s);
            };
        };
        auto behind = [&, w](cudaStream_t s) {
            if (w == 1)
                kb_gemm_layer(g, 1, s);
        };
        char lay[64];
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0] && ns[ni] <= K->D.n_max; ni++) {
            size_t n = ns[ni];
            auto prep = spun([&, w, n](cudaStream_t s) {
                if (w == 2)
                    CK(cudaMemcpyAsync(x, x2, 8 * n * 4, cudaMemcpyDeviceToDevice, s));
            });
            kb_row_t r = kb_row("topk", "radix");
            r.n_tokens = (long long)n;
            r.heads = 8;
            r.k = k;
            r.placement = "hbm";
            snprintf(lay, sizeof lay, ";%s", what[w]);
            r.layout = lay;
            r.bytes_moved = 4.0 * 8 * n * (KREF_TOPK_PASSES + 1);
            r.ref_gbps = kb_ceil.hbm_gbps;
            ks_put(K, &r, time_around(K, [&](cudaStream_t s) { kb_topk(x, 8, n, k, idx, ws, s); }, 20 + n / 1e3, prep,
                                   behind),
                8.0 * n);
        }
        if (w == 2)
            break;   /* the scores' twin is the top-k's alone */
        auto cold = spun([](cudaStream_t) {});
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0] && ns[ni] <= K->D.n_max; ni++)
            for (int kind = 0; kind < 2; kind++) {
                size_t n = ns[ni];
                snprintf(lay, sizeof lay, "%s;%s", kind ? "signatures" : "pertoken", what[w]);
                kb_row_t r = after_scan_row(kind, n, lay);
                ks_put(K, &r, time_around(K, [&](cudaStream_t s) { after_scan(K, kind, n, &fb, s); }, 10,
                                       cold, behind),
                    (double)HEADS * n);
            }
        for (int qh = 0; qh < 2; qh++) {
            int heads = qh ? HEADS * QGROUP : HEADS, gq = qh ? 1 : QGROUP, nsp = kb_attn_splits(k, heads);
            void *part = ks_dalloc(kb_attn_part_bytes(heads, nsp, gq));
            auto written = spun([&, heads](cudaStream_t s) {
                CK(cudaMemsetAsync(win, 0x3b, (size_t)heads * k * 2 * KREF_D * 2, s));
            });
            kb_stats_t st = time_around(K, [&](cudaStream_t s) {
                kb_attn_partial(win, (size_t)k * 2 * KREF_D, 2 * KREF_D, KREF_D, Q->q, gq, heads, k, nsp, 0,
                                nsp, part, s);
            }, 10, written, behind);
            snprintf(lay, sizeof lay, "%s;l2;%s", qh ? "interleaved;qh" : "interleaved", what[w]);
            kb_row_t r = ks_attn_row(k, heads, gq, lay);
            ks_put(K, &r, st, (double)heads * k);
            CK(cudaFree(part));
        }
    }
    after_bufs_free(&fb);
    CK(cudaFree(win));
    CK(cudaFree(x));
    CK(cudaFree(x2));
    CK(cudaFree(idx));
    kb_topk_ws_free(ws);
    kb_gemm_free(g);
}
