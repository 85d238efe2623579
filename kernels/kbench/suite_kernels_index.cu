/* suite_kernels_index.cu: the kernels suite's index rows: quantising keys into planes and
 * flushing chunks, the read plans, the index fetches and every method's scan. */
#include <stdlib.h>
#include <string.h>
#include "kern.h"
#include "misc.h"
#include "suite_kernels.h"
#include "ref/scans.h"

void ks_sec_quantize_flush(ks_t *K)
{
    size_t nmax = K->ns[K->nn - 1];
    uint16_t *k = (uint16_t *)ks_dalloc(HEADS * nmax * KREF_D * 2);
    kb_make_keys(k, nmax * KREF_D, KREF_D, HEADS, nmax, 11, K->s);
    int Ts[3] = {256, 1024, 4096};
    uint8_t *out = (uint8_t *)ks_dalloc(HEADS * nmax / 256 * kref_chunk_bytes(256));
    for (int ti = 0; ti < 3; ti++) {
        int T = Ts[ti];
        for (int i = -1; i < K->nn; i++) {        /* i = -1: one chunk, the decode-time unit */
            size_t n = i < 0 ? (size_t)T : K->ns[i];
            if (n < (size_t)T || (i >= 0 && T != T_DEFAULT))
                continue;
            size_t ob = n / T * kref_chunk_bytes(T);
            kb_stats_t st = time_it(K, [&](cudaStream_t s) {
                kb_quantize(k, nmax * KREF_D, HEADS, n, T, out, ob, s);
            }, 10, 1);
            kb_row_t r = kb_row("quantize", i < 0 ? "chunk" : "bulk");
            r.n_tokens = (long long)n;
            r.heads = HEADS;
            r.bits = 4;
            r.chunk_tokens = T;
            r.placement = "hbm";
            r.bytes_moved = (double)HEADS * (n * KREF_D * 2 + ob);
            r.ref_gbps = kb_ceil.hbm_gbps;
            ks_put(K, &r, st, (double)HEADS * n);
        }
        /* flush: the chunk of every head to its place in the host index */
        size_t cb = kref_chunk_bytes(T), hs = K->D.per_head[KB_M_FATHOM];
        kb_stats_t st = time_it(K, [&](cudaStream_t s) {
            for (int h = 0; h < HEADS; h++)
                CK(cudaMemcpyAsync(K->D.h[KB_M_FATHOM] + h * hs, out + h * cb, cb,
                                   cudaMemcpyDeviceToHost, s));
        }, 20, 0);
        kb_row_t r = kb_row("flush", "index_chunk");
        r.heads = HEADS;
        r.chunk_tokens = T;
        r.piece_bytes = (long long)cb;
        r.pieces = HEADS;
        r.placement = "host";
        r.allocator = "hostalloc";
        r.bytes_moved = (double)HEADS * cb;
        r.ref_gbps = kb_ceil.d2h_gbps;
        ks_put(K, &r, st, HEADS);
    }
    /* flush of 64 new tokens' K/V rows per head (interleaved: one piece per head) */
    size_t kvb = 64 * 2 * KREF_D * 2, hs = K->D.per_head[KB_M_DENSE];
    kb_stats_t st = time_it(K, [&](cudaStream_t s) {
        for (int h = 0; h < HEADS; h++)
            CK(cudaMemcpyAsync(K->D.h[KB_M_DENSE] + h * hs, (uint8_t *)k + h * kvb, kvb,
                               cudaMemcpyDeviceToHost, s));
    }, 20, 0);
    kb_row_t r = kb_row("flush", "kv64");
    r.heads = HEADS;
    r.piece_bytes = (long long)kvb;
    r.pieces = HEADS;
    r.placement = "host";
    r.layout = "interleaved";
    r.allocator = "hostalloc";
    r.bytes_moved = (double)HEADS * kvb;
    r.ref_gbps = kb_ceil.d2h_gbps;
    ks_put(K, &r, st, HEADS);
    CK(cudaFree(k));
    CK(cudaFree(out));
}

/* Plan bytes per chunk summed over heads (host read-back). */
static double plan_chunk_bytes(ks_t *K, const kref_plan_t *dplan)
{
    kref_plan_t p[HEADS];
    CK(cudaStreamSynchronize(K->s));
    CK(cudaMemcpy(p, dplan, sizeof p, cudaMemcpyDeviceToHost));
    double b = 0;
    for (int h = 0; h < HEADS; h++)
        b += p[h].chunk_prefix_bytes;
    return b;
}

void ks_sec_wf_plan(ks_t *K, queries_t *Q)
{
    struct {
        const char *v;
        int budget, decay;
    } c[4] = {{"fathom", 48, 4}, {"fathom", 96, 4}, {"sparq", 64, 1}, {"sparq", 128, 1}};
    for (int i = 0; i < 4; i++) {
        /* after a flush like every device kernel: the GPU is busy while the launch arrives, so the
         * row is the kernel's own time (an idle GPU would wait for the launch inside the window) */
        kb_stats_t st = time_it(K, [&](cudaStream_t s) {
            kb_wf_plan(Q->q, QGROUP, Q->sigma2, HEADS, c[i].budget, c[i].decay, T_DEFAULT, Q->plan, s);
        }, 5, 1);
        kb_row_t r = kb_row("wf_plan", c[i].v);
        r.heads = HEADS;
        r.qheads = QGROUP;
        r.bits = c[i].budget;
        r.chunk_tokens = T_DEFAULT;
        ks_put(K, &r, st, HEADS);
    }
}

/* Plane-prefix fetch from host by each path; scans of the result. */
void ks_sec_index_fetch(ks_t *K, queries_t *Q)
{
    size_t cap = K->D.n_max / T_DEFAULT * kref_chunk_bytes(T_DEFAULT);
    uint8_t *cmp = (uint8_t *)ks_dalloc(HEADS * cap);
    kref_plan_t hp[HEADS];
    for (int meth = 0; meth < 2; meth++) {
        int budget = meth ? 64 : 48, decay = meth ? 1 : 4;
        for (int i = 0; i < K->nn; i++) {
            size_t n = K->ns[i], chunks = n / T_DEFAULT;
            size_t hs = n / T_DEFAULT * kref_chunk_bytes(T_DEFAULT);
            size_t cs = (hs + 15) / 16 * 16;
            kb_wf_plan(Q->q, QGROUP, Q->sigma2, HEADS, budget, decay, T_DEFAULT, Q->plan, K->s);
            double bytes = chunks * plan_chunk_bytes(K, Q->plan);
            CK(cudaMemcpy(hp, Q->plan, sizeof hp, cudaMemcpyDeviceToHost));
            const uint8_t *src = K->D.h[KB_M_FATHOM];
            for (int path = 0; path < 3; path++) {
                if (path == 2 && (meth || n > 256 * 1024))
                    continue;                       /* batched: ~0.5 us per piece */
                if (path == 1 && meth)
                    continue;
                void **dsts = NULL, **srcs = NULL;
                size_t *sizes = NULL, np = 0;
                if (path == 2) {
                    for (int h = 0; h < HEADS; h++)
                        np += chunks * hp[h].n_active;
                    dsts = (void **)malloc(np * sizeof *dsts);
                    srcs = (void **)malloc(np * sizeof *srcs);
                    sizes = (size_t *)malloc(np * sizeof *sizes);
                    size_t e = 0;
                    for (int h = 0; h < HEADS; h++)
                        for (int a = 0; a < hp[h].n_active; a++)
                            for (size_t c = 0; c < chunks; c++, e++) {
                                sizes[e] = kref_prefix_bytes(T_DEFAULT, hp[h].depth[a]);
                                dsts[e] = cmp + h * cs + chunks * hp[h].cum[a] + c * sizes[e];
                                srcs[e] = (void *)(src + h * hs + c * kref_chunk_bytes(T_DEFAULT) +
                                                   hp[h].chan[a] * kref_chan_bytes(T_DEFAULT));
                            }
                }
                kb_stats_t st = time_it(K, [&](cudaStream_t s) {
                    if (path == 0) {
                        kb_fetch_prefix_sm(src, hs, cmp, cs, Q->plan, HEADS, n, T_DEFAULT,
                                           4 * kb_sm_count(), s);
                    } else if (path == 1) {
                        for (int h = 0; h < HEADS; h++)
                            for (int a = 0; a < hp[h].n_active; a++) {
                                size_t pb = kref_prefix_bytes(T_DEFAULT, hp[h].depth[a]);
                                CK(cudaMemcpy2DAsync(cmp + h * cs + chunks * hp[h].cum[a], pb,
                                                     src + h * hs + hp[h].chan[a] *
                                                                        kref_chan_bytes(T_DEFAULT),
                                                     kref_chunk_bytes(T_DEFAULT), pb, chunks,
                                                     cudaMemcpyHostToDevice, s));
                            }
                    } else {
                        struct cudaMemcpyAttributes at;
                        memset(&at, 0, sizeof at);
                        at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
                        size_t i0 = 0;
                        CK(cudaMemcpyBatchAsync(dsts, (const void *const *)srcs, sizes, np, &at,
                                                &i0, 1, s));
                    }
                }, bytes / (kb_ceil.h2d_gbps * 1e3), 0);
                static const char *pv[3] = {"sm", "ce2d", "cebatch"};
                kb_row_t r = kb_row("index_fetch", pv[path]);
                r.method = meth ? "sparq" : "fathom";
                r.n_tokens = (long long)n;
                r.heads = HEADS;
                r.bits = meth ? 68 : 56;
                r.chunk_tokens = T_DEFAULT;
                r.region_bytes = (long long)(HEADS * hs);
                r.placement = "host";
                r.allocator = "hostalloc";
                r.layout = "planes";
                r.bytes_moved = bytes;
                r.ref_gbps = kb_ceil.h2d_gbps;
                if (path == 0)
                    r.blocks = 4 * kb_sm_count();
                if (path == 2)
                    r.pieces = (long long)np;
                if (path == 1) {          /* the 2D copies issued, one per (head, channel) */
                    long long copies = 0;
                    for (int h = 0; h < HEADS; h++)
                        copies += hp[h].n_active;
                    r.pieces = copies;
                }
                ks_put(K, &r, st, (double)HEADS * n);
                free(dsts);
                free(srcs);
                free(sizes);
            }
        }
    }
    CK(cudaFree(cmp));
}

kb_row_t ks_scan_row(const char *v, size_t n, int bits, const char *place, const char *layout,
                         double bytes)
{
    kb_row_t r = kb_row("scan", v);
    r.n_tokens = (long long)n;
    r.heads = HEADS;
    r.bits = bits;
    r.placement = place;
    r.layout = layout;
    r.bytes_moved = bytes;
    r.ref_gbps = strcmp(place, "host") ? kb_ceil.hbm_gbps : kb_ceil.h2d_gbps;
    if (!strcmp(place, "host"))
        r.allocator = "hostalloc";
    return r;
}

/* A scan's row after an L2 flush, and where `l2` a second row ("<layout>;l2") with its index and
 * scores still in the L2: the flush, then the same scan untimed, then the timed one. In a step the
 * scan right after its index fetch reads an index just written, still in the L2 up to its size. */
template <class F> static void scan_rows(ks_t *K, F f, double est_us, kb_row_t r, double ops, bool l2)
{
    ks_put(K, &r, time_it(K, f, est_us, 1), ops);
    if (!l2)
        return;
    char lay[64];
    snprintf(lay, sizeof lay, "%s;l2", r.layout);
    r.layout = lay;
    ks_put(K, &r, time_it_prep(K, f, est_us, [&](cudaStream_t s) {
        kb_l2_flush(s);
        f(s);
    }), ops);
}

/* n at which the scans also run from the L2 (their index and scores fit in it at every method) */
#define SCAN_L2_NMAX 65536

void ks_sec_scans(ks_t *K, queries_t *Q)
{
    size_t nmax = K->D.n_max;
    float *sc = (float *)ks_dalloc(HEADS * QGROUP * nmax * 4);
    uint8_t *cmp = (uint8_t *)ks_dalloc(HEADS * (nmax / T_DEFAULT * kref_chunk_bytes(T_DEFAULT) + 16));
    float *qc = (float *)ks_dalloc(HEADS * 32 * 4);
    uint32_t *qsig = (uint32_t *)ks_dalloc(HEADS * QGROUP * 4);
    kb_make_normal(qc, HEADS * 32, 0.17f, 23, K->s);
    for (int i = 0; i < K->nn; i++) {
        size_t n = K->ns[i], hs = n / T_DEFAULT * kref_chunk_bytes(T_DEFAULT), cs = (hs + 15) / 16 * 16;
        /* planes: fathom (48 plane bits) and sparq (r = 16), full layout in HBM and compact */
        for (int meth = 0; meth < 2; meth++) {
            kb_wf_plan(Q->q, QGROUP, Q->sigma2, HEADS, meth ? 64 : 48, meth ? 1 : 4, T_DEFAULT,
                       Q->plan, K->s);
            double idxb = n / T_DEFAULT * plan_chunk_bytes(K, Q->plan);
            kb_fetch_prefix_sm(K->D.d[KB_M_FATHOM], hs, cmp, cs, Q->plan, HEADS, n, T_DEFAULT,
                               4 * kb_sm_count(), K->s);
            /* full, compact, from host (every n: a fit-set curve for the zero-copy scan), then qg 4
             * and kernels 1 and 2 on the full layout at 16K, 64K, 256K (three sizes of the fit set:
             * a line of their own, not a point on the main kernel's fixed time) and 1M */
            for (int mode = 0; mode < 6; mode++) {
                int compact = mode == 1, qg = mode == 2 ? 4 : 1, host = mode == 3;
                int variant = mode == 4 ? 1 : (mode == 5 ? 2 : 3);
                if (mode >= 2 && !host && (meth || (n != 16384 && n != 65536 && n != 262144 && n != 1048576)))
                    continue;
                const uint8_t *idx = compact ? cmp : (host ? K->D.h[KB_M_FATHOM] : K->D.d[KB_M_FATHOM]);
                static const char *full_layout[4] = {"", "full;kernel1", "full;kernel2", "full"};
                kb_row_t r = ks_scan_row(meth ? "sparq" : "fathom", n, meth ? 68 : 56,
                                      host ? "host" : "hbm", compact ? "compact" : full_layout[variant],
                                      idxb + 4.0 * HEADS * qg * n);
                r.qheads = qg;
                r.chunk_tokens = T_DEFAULT;
                /* the compact layout is what the SM index fetch writes, and the step scans */
                scan_rows(K, [&](cudaStream_t s) {
                    kb_scan_planes(variant, idx, compact ? cs : hs, compact, Q->plan,
                                   qg == 4 ? Q->q : Q->qsum, qg, HEADS, n, T_DEFAULT, sc, s);
                }, n / 1e3, r, (double)HEADS * n, compact && n <= SCAN_L2_NMAX);
            }
        }
        /* per-token packed, 136 and 68 bits */
        for (int C = 32; C >= 16; C /= 2) {
            kb_method_t m = C == 32 ? KB_M_PT136 : KB_M_PT68;
            size_t phs = n / 64 * kref_pt_block_bytes(C);
            for (int host = 0; host < 2; host++) {
                if (host && n != 1048576)
                    continue;
                const uint8_t *idx = host ? K->D.h[m] : K->D.d[m];
                kb_row_t r = ks_scan_row(C == 32 ? "pertoken136" : "pertoken68", n, C == 32 ? 136 : 68,
                                      host ? "host" : "hbm", "pertoken", HEADS * (phs + 4.0 * n));
                scan_rows(K, [&](cudaStream_t s) {
                    kb_scan_pertoken(idx, phs, C, qc, HEADS, n, sc, s);
                }, n / 1e3, r, (double)HEADS * n, !host && n <= SCAN_L2_NMAX);
            }
        }
        /* HashAttention: 32 query heads */
        for (int host = 0; host < 2; host++) {
            if (host && n != 1048576)
                continue;
            const uint32_t *sig = (const uint32_t *)(host ? K->D.h[KB_M_HASH] : K->D.d[KB_M_HASH]);
            kb_row_t r = ks_scan_row("hashattn", n, 32 * QGROUP, host ? "host" : "hbm", "signatures",
                                  8.0 * HEADS * QGROUP * n);
            r.qheads = QGROUP;
            scan_rows(K, [&](cudaStream_t s) {
                kb_scan_hash(sig, qsig, HEADS * QGROUP, n, sc, s);
            }, n / 1e3, r, (double)HEADS * QGROUP * n, !host && n <= SCAN_L2_NMAX);
        }
        /* page landmarks */
        for (int P = 8; P <= 16; P *= 2) {
            kb_method_t m = P == 8 ? KB_M_LM8 : KB_M_LM16;
            size_t np = n / P, lhs = np * KREF_LM_PAGE_BYTES;
            kb_row_t r = ks_scan_row(P == 8 ? "landmark8" : "landmark16", n, 4096 / P, "hbm", "pages",
                                  HEADS * (lhs + 4.0 * np));
            scan_rows(K, [&](cudaStream_t s) {
                kb_scan_landmark(K->D.d[m], lhs, Q->qsum, HEADS, np, sc, s);
            }, n / 1e3, r, (double)HEADS * n, n <= SCAN_L2_NMAX);
        }
    }
    CK(cudaFree(sc));
    CK(cudaFree(cmp));
    CK(cudaFree(qc));
    CK(cudaFree(qsig));
}
