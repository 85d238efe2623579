/* suite_kernels.cu: every kernel over a grid of n (4K to 4M tokens), bits, k,
 * heads, batch and placement, after the reference checks pass.
 *
 * Data: one layer (8 KV heads, 4 query heads each, T = 1024) built once at the
 * largest n, in HBM and in pinned host memory (step.h); a case at n tokens
 * lays its heads out at n-token strides inside it. Each row's ref_gbps is
 * the ceiling it should be read against: HBM for device-resident kernels,
 * the H2D copy peak for anything crossing the link.
 *
 * Rows shaped like the step suite: attention rows time the split-K partial
 * alone (the step times the combine in attn_tail, after both partials);
 * attn_combine rows time the combine by split count (each thread walks
 * the splits serially); attn_sparse rows with layout "interleaved;l2" read
 * winners just rewritten into L2, as after the winner gather; top-k also runs
 * at 32-128 rows for n <= 256K.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kb.h"
#include "kern.h"
#include "checks.h"
#include "step.h"
#include "gemm.h"
#include "ref/scans.h"
#include "ref/topk.h"

#define HEADS 8
#define QGROUP 4
#define T_DEFAULT 1024

typedef struct {
    const kb_opts_t *o;
    kb_csv_t *csv;
    cudaStream_t s;
    kb_layer_data_t D;
    const size_t *ns;
    int nn;
    int flush_fetch;               /* --only index_fetch: also each SM fetch after an L2 flush */
} ks_t;

/* Time any callable f(stream) with kb_time_around; prep(stream) runs before each repetition,
 * outside the timed events, and post(stream) is queued behind them, untimed (kb_time_around
 * passes one context to all three). */
template <class F, class P, class Q> struct timed_t {
    F f;
    P prep;
    Q post;
};
template <class C> static void timed_fn(void *p, cudaStream_t s) { ((C *)p)->f(s); }
template <class C> static void timed_prep(void *p, cudaStream_t s) { ((C *)p)->prep(s); }
template <class C> static void timed_post(void *p, cudaStream_t s) { ((C *)p)->post(s); }
template <class F, class P, class Q> static kb_stats_t time_around(ks_t *K, F f, double est_us, P prep, Q post)
{
    kb_timing_t tm = kb_timing_for(est_us, K->o->quick);
    typedef timed_t<F, P, Q> C;
    C c = {f, prep, post};
    return kb_time_around(timed_fn<C>, timed_prep<C>, timed_post<C>, &c, K->s, &tm);
}
template <class F, class P> static kb_stats_t time_it_prep(ks_t *K, F f, double est_us, P prep)
{
    return time_around(K, f, est_us, prep, [](cudaStream_t) {});
}
/* The common prep: an L2 flush for cold rows, or nothing. */
template <class F> static kb_stats_t time_it(ks_t *K, F f, double est_us, int flush)
{
    return time_it_prep(K, f, est_us, [flush](cudaStream_t s) {
        if (flush)
            kb_l2_flush(s);
    });
}

static void put(ks_t *K, kb_row_t *r, kb_stats_t st, double ops)
{
    r->st = st;
    if (ops > 0 && st.med > 0)
        r->per_s = ops / (st.med * 1e-6);
    kb_csv_row(K->csv, r);
}

static void *dalloc(size_t bytes)
{
    void *p;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, 0x3b, bytes));
    return p;
}

static void sec_quantize_flush(ks_t *K)
{
    size_t nmax = K->ns[K->nn - 1];
    uint16_t *k = (uint16_t *)dalloc(HEADS * nmax * KREF_D * 2);
    kb_make_keys(k, nmax * KREF_D, KREF_D, HEADS, nmax, 11, K->s);
    int Ts[3] = {256, 1024, 4096};
    uint8_t *out = (uint8_t *)dalloc(HEADS * nmax / 256 * kref_chunk_bytes(256));
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
            put(K, &r, st, (double)HEADS * n);
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
        put(K, &r, st, HEADS);
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
    put(K, &r, st, HEADS);
    CK(cudaFree(k));
    CK(cudaFree(out));
}

typedef struct {
    float *q, *qsum, *sigma2;
    kref_plan_t *plan;
} queries_t;

static queries_t make_queries(ks_t *K)
{
    queries_t Q;
    Q.q = (float *)dalloc(HEADS * QGROUP * KREF_D * 4);
    Q.qsum = (float *)dalloc(HEADS * KREF_D * 4);
    Q.sigma2 = (float *)dalloc(KREF_D * 4);
    Q.plan = (kref_plan_t *)dalloc(HEADS * sizeof(kref_plan_t));
    kb_make_normal(Q.q, HEADS * QGROUP * KREF_D, 0.0884f, 21, K->s);
    kb_make_normal(Q.qsum, HEADS * KREF_D, 0.17f, 22, K->s);
    float s2[KREF_D];
    for (int j = 0; j < KREF_D; j++)
        s2[j] = kref_key_sigma(j) * kref_key_sigma(j);
    CK(cudaMemcpy(Q.sigma2, s2, sizeof s2, cudaMemcpyHostToDevice));
    return Q;
}

static void free_queries(queries_t *Q)
{
    CK(cudaFree(Q->q));
    CK(cudaFree(Q->qsum));
    CK(cudaFree(Q->sigma2));
    CK(cudaFree(Q->plan));
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

static void sec_wf_plan(ks_t *K, queries_t *Q)
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
        put(K, &r, st, HEADS);
    }
}

/* Plane-prefix fetch from host by each path; scans of the result. */
static void sec_index_fetch(ks_t *K, queries_t *Q)
{
    size_t cap = K->D.n_max / T_DEFAULT * kref_chunk_bytes(T_DEFAULT);
    uint8_t *cmp = (uint8_t *)dalloc(HEADS * cap);
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
                if ((path == 1 && meth) || (path && K->flush_fetch > 1))
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
                }, bytes / (kb_ceil.h2d_gbps * 1e3), path == 0 && K->flush_fetch > 1);
                static const char *pv[3] = {"sm", "ce2d", "cebatch"};
                kb_row_t r = kb_row("index_fetch", path == 0 && K->flush_fetch > 1 ? "sm_flushed" : pv[path]);
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
                put(K, &r, st, (double)HEADS * n);
                free(dsts);
                free(srcs);
                free(sizes);
            }
        }
    }
    CK(cudaFree(cmp));
}

static kb_row_t scan_row(const char *v, size_t n, int bits, const char *place, const char *layout,
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
    put(K, &r, time_it(K, f, est_us, 1), ops);
    if (!l2)
        return;
    char lay[64];
    snprintf(lay, sizeof lay, "%s;l2", r.layout);
    r.layout = lay;
    put(K, &r, time_it_prep(K, f, est_us, [&](cudaStream_t s) {
        kb_l2_flush(s);
        f(s);
    }), ops);
}

/* n at which the scans also run from the L2 (their index and scores fit in it at every method) */
#define SCAN_L2_NMAX 65536

static void sec_scans(ks_t *K, queries_t *Q)
{
    size_t nmax = K->D.n_max;
    float *sc = (float *)dalloc(HEADS * QGROUP * nmax * 4);
    uint8_t *cmp = (uint8_t *)dalloc(HEADS * (nmax / T_DEFAULT * kref_chunk_bytes(T_DEFAULT) + 16));
    float *qc = (float *)dalloc(HEADS * 32 * 4);
    uint32_t *qsig = (uint32_t *)dalloc(HEADS * QGROUP * 4);
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
                kb_row_t r = scan_row(meth ? "sparq" : "fathom", n, meth ? 68 : 56,
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
                kb_row_t r = scan_row(C == 32 ? "pertoken136" : "pertoken68", n, C == 32 ? 136 : 68,
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
            kb_row_t r = scan_row("hashattn", n, 32 * QGROUP, host ? "host" : "hbm", "signatures",
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
            kb_row_t r = scan_row(P == 8 ? "landmark8" : "landmark16", n, 4096 / P, "hbm", "pages",
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
    put(K, &r, st, (double)rows * n);
}

/* --only topk_span: what sets the radix top-k's time per score of a block as a block's span grows
 * (8 rows of 4M-16M scores, 66 blocks a row, against 64-512 rows of 256K, 1-8 blocks a row, at the
 * same 512-528 blocks), and whether rows a power of two apart read slower (each count of scores
 * also as a round number of about the same size). A look, not a fit set: no full run. */
static void sec_topk_span(ks_t *K)
{
    static const struct { int rows; size_t n; } cs[] = {
        {8, 4194304}, {8, 4000000}, {8, 16777216}, {8, 16000000}, {32, 1048576}, {32, 1000000},
        {64, 262144}, {64, 250000}, {128, 262144}, {128, 250000}, {256, 262144}, {256, 250000},
        {512, 262144}, {512, 250000}};
    size_t xn = (size_t)512 * 262144;
    float *x = (float *)dalloc(xn * 4);
    kb_make_normal(x, xn, 3.0f, 31, K->s);
    uint32_t *idx = (uint32_t *)dalloc((size_t)512 * 2048 * 4);
    kb_topk_ws_t *ws = kb_topk_ws_new(512, xn);
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int k = 256; k <= 2048; k *= 8)
            topk_row(K, x, cs[c].rows, cs[c].n, k, idx, ws);
    kb_topk_ws_free(ws);
    CK(cudaFree(x));
    CK(cudaFree(idx));
}

static void sec_topk(ks_t *K)
{
    size_t nmax = K->o->quick ? (1u << 20) : (16u << 20);
    int rows_max = HEADS * QGROUP;
    /* room for the grid below and for TOPK_ROWS_MAX rows at TOPK_MANY_NMAX
     * (the quick grid's 8 x 1M is smaller) */
    size_t xn = HEADS * nmax, many = (size_t)TOPK_ROWS_MAX * TOPK_MANY_NMAX;
    xn = xn < many ? many : xn;
    float *x = (float *)dalloc(xn * 4);
    kb_make_normal(x, xn, 3.0f, 31, K->s);
    uint32_t *idx = (uint32_t *)dalloc(TOPK_ROWS_MAX * 4096 * 4);
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

/* The row of sparse attention over k winners of `heads` heads with g queries each, in HBM. */
static kb_row_t attn_row(int k, int heads, int g, const char *layout)
{
    kb_row_t r = kb_row("attn_sparse", "splitk");
    r.k = k;
    r.heads = heads;
    r.qheads = g;
    r.placement = "hbm";
    r.layout = layout;
    r.bytes_moved = (double)heads * k * 512;
    r.ref_gbps = kb_ceil.hbm_gbps;
    return r;
}

/* Sparse attention over k gathered rows (interleaved, in HBM) per head: the partial kernel alone,
 * as the step's attn_sparse stage (its combine runs in attn_tail). g = 4 over the 8 KV heads'
 * winners, or g = 1 over each of the 32 query heads' own (HashAttention's shape, layout ";qh": 4x
 * the rows at a quarter of the arithmetic per row, and 4x the blocks). l2: before each repetition
 * the L2 is flushed and the winners rewritten, so they sit in L2 as after the step's winner gather:
 * copied from win2 (g = 4), or set by a memset (qh: a copy would stream twice their 16-32 MiB through
 * the 60 MiB L2, and kbench e6617d4's copy left the qh rows at k = 2048 slower than the step's
 * attention after its gather, 11.8 us against 10.7, and at 4096 slower than cold). */
static void sparse_attn_row(ks_t *K, queries_t *Q, uint16_t *win, const uint16_t *win2, int k,
                            int l2, int qh)
{
    int heads = qh ? HEADS * QGROUP : HEADS, g = qh ? 1 : QGROUP;
    int ns = kb_attn_splits(k, heads);
    size_t wb = (size_t)heads * k * 2 * KREF_D * 2;
    void *part = dalloc(kb_attn_part_bytes(heads, ns, g));
    auto partial = [&](cudaStream_t s) {
        kb_attn_partial(win, (size_t)k * 2 * KREF_D, 2 * KREF_D, KREF_D, Q->q, g, heads, k, ns, 0,
                        ns, part, s);
    };
    auto rewrite = [&](cudaStream_t s) {
        kb_l2_flush(s);
        if (qh)
            CK(cudaMemsetAsync(win, 0x3b, wb, s));
        else
            CK(cudaMemcpyAsync(win, win2, wb, cudaMemcpyDeviceToDevice, s));
    };
    kb_stats_t st = l2 ? time_it_prep(K, partial, 10, rewrite) : time_it(K, partial, 10, 1);
    static const char *layouts[2][2] = {{"interleaved", "interleaved;l2"},
                                        {"interleaved;qh", "interleaved;qh;l2"}};
    kb_row_t r = attn_row(k, heads, g, layouts[qh][l2]);
    put(K, &r, st, (double)heads * k);
    CK(cudaFree(part));
}

/* Winner fetch from host K/V by layout, then sparse attention over winners. */
static void sec_winners_attn(ks_t *K, queries_t *Q)
{
    int kmax = 4096, ks[] = {256, 1024, 2048, 4096};
    uint32_t *idx = (uint32_t *)dalloc(HEADS * kmax * 4);
    uint64_t *off = (uint64_t *)dalloc(HEADS * kmax * 2 * 8);
    size_t win_bytes = (size_t)HEADS * QGROUP * kmax * 2 * KREF_D * 2;   /* the query heads' own */
    uint16_t *win = (uint16_t *)dalloc(win_bytes);
    uint32_t *hidx = (uint32_t *)malloc(HEADS * kmax * 4);
    struct {
        const char *name;
        int npiece, P, shared;
        size_t piece;
    } L[5] = {{"apart", 2, 1, 0, 256}, {"interleaved", 1, 1, 0, 512}, {"token", 1, 1, 1, 4096},
              {"page8", 1, 8, 0, 4096}, {"page16", 1, 16, 0, 8192}};
    const uint8_t *kv = K->D.h[KB_M_DENSE];
    size_t nsel[3] = {256 * 1024, 1024 * 1024, 4u << 20};
    for (int ni = 0; ni < 3; ni++) {
        size_t n = nsel[ni];
        if (n > K->D.n_max || (K->o->quick && ni != 1))
            continue;
        for (int li = 0; li < 5; li++)
            for (int ki = 0; ki < 4; ki++) {
                int k = ks[ki], heads = L[li].shared ? 1 : HEADS, kk = k / L[li].P;
                for (int i = 0; i < heads * kk; i++)
                    hidx[i] = (uint32_t)(kref_mix64(i * 131 + k + n) % (n / L[li].P));
                CK(cudaMemcpy(idx, hidx, heads * kk * 4, cudaMemcpyHostToDevice));
                /* apart: K region then V region; others: per-head rows of 512 B (token:
                 * all heads of a token together, 4 KiB) */
                uint64_t hs = L[li].shared ? 0 : (li == 0 ? n * 256 : n * 512);
                uint64_t rs = L[li].piece, ps = li == 0 ? (uint64_t)HEADS * n * 256 : 0;
                size_t npieces = (size_t)heads * kk * L[li].npiece;
                kb_stats_t st = time_it(K, [&](cudaStream_t s) {
                    kb_winner_offsets(off, idx, heads, 1, kk, L[li].npiece, hs, rs, ps, s);
                    kb_gather(2, win, kv, off, npieces, L[li].piece, 4 * kb_sm_count(), s);
                }, 2.0 * HEADS * k * 512 / 1e4, 0);
                kb_row_t r = kb_row("winner_fetch", "sm");
                r.n_tokens = (long long)n;
                r.heads = HEADS;
                r.k = k;
                r.piece_bytes = (long long)L[li].piece;
                r.pieces = (long long)npieces;
                r.region_bytes = (long long)(HEADS * n * 512);
                r.blocks = 4 * kb_sm_count();
                r.layout = L[li].name;
                r.placement = "host";
                r.allocator = "hostalloc";
                r.bytes_moved = (double)npieces * L[li].piece;
                r.ref_gbps = kb_ceil.h2d_gbps;
                put(K, &r, st, (double)HEADS * k);
            }
    }
    /* sparse attention over the gathered rows: cold, and just rewritten (in L2) */
    uint16_t *win2 = (uint16_t *)dalloc(win_bytes);
    CK(cudaMemcpyAsync(win2, win, win_bytes, cudaMemcpyDeviceToDevice, K->s));
    for (int qh = 0; qh < 2; qh++)
        for (int ki = 0; ki < 4; ki++)
            for (int l2 = 0; l2 < 2; l2++)
                sparse_attn_row(K, Q, win, win2, ks[ki], l2, qh);
    CK(cudaFree(win2));
    free(hidx);
    CK(cudaFree(idx));
    CK(cudaFree(off));
    CK(cudaFree(win));
}

/* The winner fetch with the K/V in HBM (the step's hbm_all placement): as the step's stage, the
 * winners' offsets and the same SM gather of each head's k rows of 512 B, interleaved, from a
 * device region of 8 heads x n tokens, after an L2 flush; bytes_moved counts each byte read and
 * written (HBM traffic, as odsim prices it). (3538544 timed the gather alone.) */
static void sec_winners_hbm(ks_t *K)
{
    static const size_t ns[] = {65536, 262144, 1048576, 4194304};
    int ks[] = {256, 1024, 2048, 4096, 8192}, kmax = 8192;
    size_t nmax = K->o->quick ? 262144 : 4194304, piece = 512;
    float *kv = (float *)dalloc((size_t)HEADS * nmax * piece);
    kb_make_normal(kv, (size_t)HEADS * nmax * piece / 4, 1.0f, 37, K->s);
    uint32_t *idx = (uint32_t *)dalloc((size_t)HEADS * kmax * 4);
    uint64_t *off = (uint64_t *)dalloc((size_t)HEADS * kmax * 8);
    void *win = dalloc((size_t)HEADS * kmax * piece);
    uint32_t *hidx = (uint32_t *)malloc((size_t)HEADS * kmax * 4);
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0] && ns[ni] <= nmax; ni++)
        for (int ki = 0; ki < 5; ki++) {
            size_t n = ns[ni];
            int k = ks[ki];
            for (int i = 0; i < HEADS * k; i++)
                hidx[i] = (uint32_t)(kref_mix64(i * 131 + k + n) % n);
            CK(cudaMemcpy(idx, hidx, (size_t)HEADS * k * 4, cudaMemcpyHostToDevice));
            size_t npieces = (size_t)HEADS * k;
            kb_stats_t st = time_it(K, [&](cudaStream_t s) {   /* the step's stage: offsets, then the gather */
                kb_winner_offsets(off, idx, HEADS, 1, k, 1, n * piece, piece, 0, s);
                kb_gather(2, win, kv, off, npieces, piece, 4 * kb_sm_count(), s);
            }, 2.0 * npieces * piece / (kb_ceil.hbm_gbps * 1e3), 1);
            kb_row_t r = kb_row("winner_fetch", "sm");
            r.n_tokens = (long long)n;
            r.heads = HEADS;
            r.k = k;
            r.piece_bytes = (long long)piece;
            r.pieces = (long long)npieces;
            r.region_bytes = (long long)(HEADS * n * piece);
            r.blocks = 4 * kb_sm_count();
            r.layout = "interleaved";
            r.placement = "hbm";
            r.bytes_moved = 2.0 * npieces * piece;
            r.ref_gbps = kb_ceil.hbm_gbps;
            put(K, &r, st, (double)HEADS * k);
        }
    free(hidx);
    CK(cudaFree(win));
    CK(cudaFree(off));
    CK(cudaFree(idx));
    CK(cudaFree(kv));
}

static void attn_case(ks_t *K, queries_t *Q, const char *op, const uint16_t *kv, size_t hs, size_t n,
                      const char *place)
{
    int ns = kb_attn_splits(n, HEADS);
    void *part = dalloc(kb_attn_part_bytes(HEADS, ns, QGROUP));
    double bytes = (double)HEADS * n * 512;
    int host = !strcmp(place, "host");
    kb_stats_t st = time_it(K, [&](cudaStream_t s) {
        kb_attn_partial(kv, hs, 2 * KREF_D, KREF_D, Q->q, QGROUP, HEADS, n, ns, 0, ns, part, s);
    }, bytes / ((host ? kb_ceil.h2d_gbps : kb_ceil.hbm_gbps) * 1e3), !host);
    kb_row_t r = kb_row(op, "splitk");
    r.n_tokens = (long long)n;
    r.heads = HEADS;
    r.qheads = QGROUP;
    r.placement = place;
    r.layout = "interleaved";
    r.bytes_moved = bytes;
    r.ref_gbps = host ? kb_ceil.h2d_gbps : kb_ceil.hbm_gbps;
    if (host)
        r.allocator = "hostalloc";
    put(K, &r, st, (double)HEADS * n);
    CK(cudaFree(part));
}

/* The combine alone (the step's attn_tail stage runs it after both partials)
 * over total_splits partials per query head. Each thread (one channel) walks
 * the splits serially, so its time grows with the count: up to 264 per
 * partial on 132 SMs (kb_attn_splits), 528 with winners and tail. Cold rows
 * flush the L2 first; "l2" rows then rewrite the partials with the partial
 * kernel, as in a step, where the combine reads them straight from L2 unless
 * that kernel streamed more K/V through the L2 than it holds (region_bytes). */
static void attn_combine_rows(ks_t *K, queries_t *Q)
{
    static const int tss[] = {16, 32, 48, 64, 128, 264, 528};
    int nts = sizeof tss / sizeof tss[0];
    void *part = dalloc(kb_attn_part_bytes(HEADS, tss[nts - 1], QGROUP));
    float *out = (float *)dalloc(HEADS * QGROUP * KREF_D * 4);
    const uint16_t *kv = (const uint16_t *)K->D.d[KB_M_DENSE];
    for (int i = 0; i < nts; i++)
        for (int l2 = 0; l2 < 2; l2++) {
            int ts = tss[i];
            size_t n = (size_t)64 * ts;            /* real partials: 64 rows per split */
            auto partial = [&](cudaStream_t s) {
                kb_attn_partial(kv, n * 2 * KREF_D, 2 * KREF_D, KREF_D, Q->q, QGROUP, HEADS, n, ts, 0,
                                ts, part, s);
            };
            partial(K->s);
            auto combine = [&](cudaStream_t s) { kb_attn_combine(part, QGROUP, HEADS, ts, out, s); };
            auto rewrite = [&](cudaStream_t s) {
                kb_l2_flush(s);
                partial(s);
            };
            kb_stats_t st = l2 ? time_it_prep(K, combine, 5 + ts / 4.0, rewrite)
                               : time_it(K, combine, 5 + ts / 4.0, 1);
            kb_row_t r = kb_row("attn_combine", "splitk");
            r.heads = HEADS;
            r.qheads = QGROUP;
            r.pieces = ts;
            r.placement = "hbm";
            r.layout = l2 ? "interleaved;l2" : "interleaved";
            r.region_bytes = (long long)(HEADS * n * 512);  /* K/V the partial read before it */
            r.bytes_moved = (double)kb_attn_part_bytes(HEADS, ts, QGROUP);
            r.ref_gbps = kb_ceil.hbm_gbps;
            put(K, &r, st, (double)HEADS * QGROUP * ts);
        }
    CK(cudaFree(part));
    CK(cudaFree(out));
}

static void sec_dense_attn(ks_t *K, queries_t *Q)
{
    for (int i = 0; i < K->nn; i++) {
        size_t n = K->ns[i];
        attn_case(K, Q, "attn_dense", (const uint16_t *)K->D.d[KB_M_DENSE], n * 2 * KREF_D, n, "hbm");
        attn_case(K, Q, "attn_dense", (const uint16_t *)K->D.h[KB_M_DENSE], n * 2 * KREF_D, n, "host");
    }
    for (size_t n = 64; n <= 8192; n *= 4)
        attn_case(K, Q, "attn_tail", (const uint16_t *)K->D.d[KB_M_DENSE], n * 2 * KREF_D, n, "hbm");
    attn_combine_rows(K, Q);
}

/* A layer's four GEMMs (batch 1) right after a memset wrote W bytes to HBM, the L2 flushed before:
 * the written lines wait dirty in the L2 until the weights' reads evict them, and their write-back
 * shares HBM with those reads (a sparse step leaves its scores, winners and fetched index so before
 * the O projection and MLP). W = 0 is the layer cold and clean. A 100 us spin (no memory traffic)
 * between the flush and the memset keeps the GPU busy while the host enqueues the four cuBLAS
 * calls, as inside a step, and the memset still ends right before them: without it the window
 * caught the host's enqueue after the flush (full runs: 118-121 us at W <= 8 MiB, out of order,
 * where a quick run had 111-114). */
static void sec_gemm_dirty(ks_t *K, kb_gemm_t *g)
{
    static const int mib[] = {0, 4, 8, 16, 24, 32, 40, 48, 64, 96, 128};
    size_t wmax = (size_t)mib[sizeof mib / sizeof *mib - 1] << 20;
    void *buf = dalloc(wmax);
    double bytes = 0;
    for (int w = KB_GEMM_QKV; w <= KB_GEMM_DOWN; w++)
        bytes += kb_gemm_bytes(g, w, 1);
    for (size_t i = 0; i < sizeof mib / sizeof *mib; i++) {
        size_t wb = (size_t)mib[i] << 20;
        int v = (int)i;
        kb_stats_t st = time_it_prep(K, [&](cudaStream_t s) { kb_gemm_layer(g, 1, s); }, 120, [&](cudaStream_t s) {
            kb_l2_flush(s);
            kb_spin(100, s);
            if (wb)
                CK(cudaMemsetAsync(buf, v, wb, s));
        });
        kb_row_t r = kb_row("gemm", "layer_after_write");
        r.batch = 1;
        r.placement = "hbm";
        r.region_bytes = (long long)wb;
        r.bytes_moved = bytes;
        r.ref_gbps = kb_ceil.hbm_gbps;
        put(K, &r, st, 0);
    }
    CK(cudaFree(buf));
}

static void sec_gemm(ks_t *K)
{
    const kb_model_t *m = kb_model(K->o->model);
    kb_gemm_t *g = kb_gemm_new(m, 256);
    for (int w = 0; w < KB_GEMM_N; w++)
        for (int b = 1; b <= 256; b *= 2) {
            if (K->o->quick && b != 1 && b != 16 && b != 256)
                continue;
            kb_stats_t st = time_it(K, [&](cudaStream_t s) { kb_gemm_run(g, w, b, s); }, 50, 1);
            kb_row_t r = kb_row("gemm", kb_gemm_name(w));
            r.batch = b;
            r.placement = "hbm";
            r.bytes_moved = kb_gemm_bytes(g, w, b);
            r.ref_gbps = kb_ceil.hbm_gbps;
            put(K, &r, st, kb_gemm_flops(g, w, b));
        }
    sec_gemm_dirty(K, g);
    kb_gemm_free(g);
}

static double wall_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* A chain of kernels that fill the GPU (3 us each), back to back (`chain`) and with an event
 * recorded after each (`chain_events`, as the step suite times its stages), behind a 1 ms spin so
 * that the host has enqueued them all: the difference over the chain's length is what an event
 * between two kernels costs it. */
#define EVENT_CHAIN 32
static void sec_event_chain(ks_t *K)
{
    cudaEvent_t ev[EVENT_CHAIN];
    for (int j = 0; j < EVENT_CHAIN; j++)
        CK(cudaEventCreate(&ev[j]));
    for (int with = 0; with < 2; with++) {
        kb_stats_t st = time_it_prep(K, [&](cudaStream_t s) {
            for (int j = 0; j < EVENT_CHAIN; j++) {
                kb_fill_spin(3, s);
                if (with)
                    CK(cudaEventRecord(ev[j], s));
            }
        }, EVENT_CHAIN * 5, [&](cudaStream_t s) {
            kb_l2_flush(s);
            kb_spin(1000, s);
        });
        kb_row_t r = kb_row("launch", with ? "chain_events" : "chain");
        r.pieces = EVENT_CHAIN;
        put(K, &r, st, EVENT_CHAIN);
    }
    for (int j = 0; j < EVENT_CHAIN; j++)
        CK(cudaEventDestroy(ev[j]));
}

static void sec_launch(ks_t *K)
{
    int n = K->o->quick ? 1000 : 10000;
    /* host-side cost per launch (back to back, no sync), and device time per launch */
    double t0 = wall_us();
    for (int i = 0; i < n; i++)
        kb_empty_launch(K->s);
    double host_us = (wall_us() - t0) / n;
    CK(cudaStreamSynchronize(K->s));
    kb_stats_t st = time_it(K, [&](cudaStream_t s) {
        for (int i = 0; i < 100; i++)
            kb_empty_launch(s);
    }, 300, 0);
    kb_row_t r = kb_row("launch", "empty_b2b");
    r.pieces = 100;
    r.st = st;
    r.per_s = 100 / (st.med * 1e-6);
    kb_csv_row(K->csv, &r);
    kb_row_t h = kb_row("launch", "host_enqueue");
    h.pieces = 1;
    h.st.reps = n;
    h.st.med = h.st.p10 = h.st.p90 = h.st.p99 = h.st.mean = host_us;
    h.per_s = 1e6 / host_us;
    kb_csv_row(K->csv, &h);
    /* host-side cost per copy issue: 4 KiB pinned H2D copies back to back, no sync */
    void *hsrc, *ddst;
    CK(cudaHostAlloc(&hsrc, 4096, cudaHostAllocDefault));
    CK(cudaMalloc(&ddst, 4096));
    int nc = n / 10;
    t0 = wall_us();
    for (int i = 0; i < nc; i++)
        CK(cudaMemcpyAsync(ddst, hsrc, 4096, cudaMemcpyHostToDevice, K->s));
    double copy_us = (wall_us() - t0) / nc;
    CK(cudaStreamSynchronize(K->s));
    /* A kernel right after a copy in its stream, timed from an event after the copy (as a step's
     * stage after its index copy), against the same kernel after a kernel (the flush): the
     * difference is the copy engine's hand-off to the SMs. */
    for (int after_copy = 0; after_copy < 2; after_copy++) {
        kb_stats_t hs = time_it_prep(K, [&](cudaStream_t s) { kb_empty_launch(s); }, 10, [&](cudaStream_t s) {
            kb_l2_flush(s);
            if (after_copy)
                CK(cudaMemcpyAsync(ddst, hsrc, 4096, cudaMemcpyHostToDevice, s));
        });
        kb_row_t hr = kb_row("launch", after_copy ? "after_copy" : "after_kernel");
        hr.pieces = 1;
        if (after_copy) {
            hr.piece_bytes = 4096;
            hr.allocator = "hostalloc";
        }
        put(K, &hr, hs, 1);
    }
    CK(cudaFreeHost(hsrc));
    CK(cudaFree(ddst));
    sec_event_chain(K);
    kb_row_t hc = kb_row("launch", "copy_enqueue");
    hc.pieces = 1;
    hc.piece_bytes = 4096;
    hc.allocator = "hostalloc";
    hc.st.reps = nc;
    hc.st.med = hc.st.p10 = hc.st.p90 = hc.st.p99 = hc.st.mean = copy_us;
    hc.per_s = 1e6 / copy_us;
    kb_csv_row(K->csv, &hc);
    int sizes[] = {1, 10, 100};
    for (int i = 0; i < 3; i++) {
        cudaGraph_t gr;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(K->s, cudaStreamCaptureModeThreadLocal));
        for (int j = 0; j < sizes[i]; j++)
            kb_empty_launch(K->s);
        CK(cudaStreamEndCapture(K->s, &gr));
        CK(cudaGraphInstantiate(&ge, gr, 0));
        kb_stats_t gs = time_it(K, [&](cudaStream_t s) { CK(cudaGraphLaunch(ge, s)); }, 10, 0);
        kb_row_t g = kb_row("graph_replay", "empty_nodes");
        g.pieces = sizes[i];
        put(K, &g, gs, sizes[i]);
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(gr));
    }
}

/* --only index_fetch: the SM fetch over synthetic plans (no fit reads them), to tell what sets a
 * fetch's rate past the region where translations stop holding: `count` channels of one depth,
 * the same channels for every head (spread evenly) or each head's own (drawn at random). */
static void sec_fetch_plans(ks_t *K)
{
    static const struct {
        int count, depth, each;
        const char *name;
    } P[] = {{35, 1, 0, "d1x35_same"}, {35, 1, 1, "d1x35_each"}, {12, 4, 0, "d4x12_same"},
             {16, 4, 0, "d4x16_same"}, {16, 4, 1, "d4x16_each"}};
    size_t cap = K->D.n_max / T_DEFAULT * kref_chunk_bytes(T_DEFAULT);
    uint8_t *cmp = (uint8_t *)dalloc(HEADS * cap);
    kref_plan_t hp[HEADS], *dp = (kref_plan_t *)dalloc(sizeof hp);
    for (size_t pi = 0; pi < sizeof P / sizeof P[0]; pi++) {
        double chunk_bytes = 0;
        for (int h = 0; h < HEADS; h++) {
            uint8_t depth[KREF_D] = {0}, order[KREF_D];
            for (int j = 0; j < KREF_D; j++)
                order[j] = (uint8_t)j;
            for (int j = KREF_D - 1; P[pi].each && j > 0; j--) {   /* Fisher-Yates */
                int o = (int)(kref_mix64(0x5eedull + pi * 1000 + h * KREF_D + j) % (uint64_t)(j + 1));
                uint8_t t = order[j];
                order[j] = order[o];
                order[o] = t;
            }
            for (int a = 0; a < P[pi].count; a++)
                depth[P[pi].each ? order[a] : a * KREF_D / P[pi].count] = (uint8_t)P[pi].depth;
            kref_plan_from_depth(depth, T_DEFAULT, &hp[h]);
            chunk_bytes += hp[h].chunk_prefix_bytes;
        }
        CK(cudaMemcpy(dp, hp, sizeof hp, cudaMemcpyHostToDevice));
        for (int i = 0; i < K->nn; i++) {
            size_t n = K->ns[i], hs = n / T_DEFAULT * kref_chunk_bytes(T_DEFAULT), cs = (hs + 15) / 16 * 16;
            double bytes = (double)(n / T_DEFAULT) * chunk_bytes;
            const uint8_t *src = K->D.h[KB_M_FATHOM];
            kb_stats_t st = time_it(K, [&](cudaStream_t s) {
                kb_fetch_prefix_sm(src, hs, cmp, cs, dp, HEADS, n, T_DEFAULT, 4 * kb_sm_count(), s);
            }, bytes / (kb_ceil.h2d_gbps * 1e3), 0);
            kb_row_t r = kb_row("index_fetch", "sm_plan");
            r.method = "synthetic";
            r.layout = P[pi].name;
            r.n_tokens = (long long)n;
            r.heads = HEADS;
            r.bits = P[pi].count * P[pi].depth;
            r.chunk_tokens = T_DEFAULT;
            r.region_bytes = (long long)(HEADS * hs);
            r.placement = "host";
            r.allocator = "hostalloc";
            r.bytes_moved = bytes;
            r.pieces = (long long)(n / T_DEFAULT) * HEADS * P[pi].count;
            r.piece_bytes = (long long)kref_prefix_bytes(T_DEFAULT, P[pi].depth);
            r.blocks = 4 * kb_sm_count();
            r.ref_gbps = kb_ceil.h2d_gbps;
            put(K, &r, st, (double)HEADS * n);
        }
    }
    CK(cudaFree(dp));
    CK(cudaFree(cmp));
}

/* f timed as the suite times it (after an L2 flush, between two events) but with an empty kernel
 * queued behind the second event, as the next stage is inside a step: 300 repetitions. */
template <class F> static kb_stats_t time_trailing(ks_t *K, F f)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    static double t[300];
    for (int r = -2; r < 300; r++) {
        kb_l2_flush(K->s);
        CK(cudaEventRecord(a, K->s));
        f(K->s);
        CK(cudaEventRecord(b, K->s));
        kb_empty_launch(K->s);
        CK(cudaStreamSynchronize(K->s));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (r >= 0)
            t[r] = ms * 1e3;
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return kb_stats(t, 300);
}

/* Per-token 136's (kind 0) or HashAttention's (kind 1) scan of n tokens from HBM: its row with
 * layout `lay`, and the scan itself on stream s. */
static kb_row_t follow_scan_row(int kind, size_t n, const char *lay)
{
    size_t phs = n / 64 * kref_pt_block_bytes(32);
    kb_row_t r = kind ? scan_row("hashattn", n, 32 * QGROUP, "hbm", lay, 8.0 * HEADS * QGROUP * n)
                      : scan_row("pertoken136", n, 136, "hbm", lay, HEADS * (phs + 4.0 * n));
    if (kind)
        r.qheads = QGROUP;
    return r;
}

/* The follow scans' queries and scores (up to nmax tokens): one per-token 136 query set, one
 * HashAttention signature per query head. */
typedef struct {
    float *sc, *qc;
    uint32_t *qsig;
} follow_bufs_t;

static follow_bufs_t follow_bufs_new(ks_t *K, size_t nmax)
{
    follow_bufs_t b;
    b.sc = (float *)dalloc(HEADS * QGROUP * nmax * 4);
    b.qc = (float *)dalloc(HEADS * 32 * 4);
    b.qsig = (uint32_t *)dalloc(HEADS * QGROUP * 4);
    kb_make_normal(b.qc, HEADS * 32, 0.17f, 23, K->s);
    return b;
}

static void follow_bufs_free(follow_bufs_t *b)
{
    CK(cudaFree(b->sc));
    CK(cudaFree(b->qc));
    CK(cudaFree(b->qsig));
}

static void follow_scan(ks_t *K, int kind, size_t n, const follow_bufs_t *b, cudaStream_t s)
{
    if (kind)
        kb_scan_hash((const uint32_t *)K->D.d[KB_M_HASH], b->qsig, HEADS * QGROUP, n, b->sc, s);
    else
        kb_scan_pertoken(K->D.d[KB_M_PT136], n / 64 * kref_pt_block_bytes(32), 32, b->qc, HEADS, n, b->sc, s);
}

/* --only follow: a kernel timed right after other kernels, as inside a step, against the suite's
 * way (right after an L2 flush, itself after the same kernel's previous repetition): per-token 136's
 * and HashAttention's 32K scans from HBM after the flush alone, after a layer's four cuBLAS GEMMs
 * (batch 1) and the flush, and after a radix top-k over 8 rows of 32K scores and the flush (layout
 * "<layout>;after_<what>"). The flush last, so their L2 is the same; what differs is which kernels
 * ran before (inside a step every kernel runs 0.3-0.9 us longer than the suite times it alone);
 * and after the flush with an empty kernel queued behind its second event ("trailing"), as the
 * next stage is in a step; after the flush and a 100 us spin of one thread ("after_spin"), as
 * the step suite starts each repetition; and after 40 layers' GEMMs (some 4.7 ms of the GPU under
 * load, as a step suite's repetitions keep it) and the flush ("after_load"). */
static void sec_follow(ks_t *K)
{
    const size_t n = 32768;
    const kb_model_t *m = kb_model(K->o->model);
    kb_gemm_t *g = kb_gemm_new(m, 1);
    kb_topk_ws_t *ws = kb_topk_ws_new(8, 8 * n);
    follow_bufs_t fb = follow_bufs_new(K, n);
    float *tx = (float *)dalloc(8 * n * 4);
    uint32_t *idx = (uint32_t *)dalloc(8 * 2048 * 4);
    kb_make_normal(tx, 8 * n, 1.0f, 29, K->s);
    static const char *const what[6] = {"after_flush", "after_gemm", "after_topk", "trailing", "after_spin",
                                        "after_load"};
    for (int kind = 0; kind < 2; kind++)
        for (int w = 0; w < 6; w++) {
            char lay[64];
            snprintf(lay, sizeof lay, "%s;%s", kind ? "signatures" : "pertoken", what[w]);
            kb_row_t r = follow_scan_row(kind, n, lay);
            auto scan = [&](cudaStream_t s) { follow_scan(K, kind, n, &fb, s); };
            kb_stats_t st = w == 3 ? time_trailing(K, scan) : time_it_prep(K, scan, 10, [&](cudaStream_t s) {
                for (int i = 0; i < (w == 1 ? 1 : w == 5 ? 40 : 0); i++)
                    kb_gemm_layer(g, 1, s);
                if (w == 2)
                    kb_topk(tx, 8, n, 2048, idx, ws, s);
                kb_l2_flush(s);
                if (w == 4)
                    kb_spin(100, s);
            });
            put(K, &r, st, (double)HEADS * n);
        }
    follow_bufs_free(&fb);
    CK(cudaFree(tx));
    CK(cudaFree(idx));
    kb_topk_ws_free(ws);
    kb_gemm_free(g);
}

/* A kernel as a decode runs it: with the layer's four cuBLAS GEMMs (batch 1) queued behind its end
 * event (layout "<layout>;after_layer": in a decode each layer's kernels run with those GEMMs
 * queued behind them), against the same with nothing behind ("<layout>;after_flush"). Both start
 * after an L2 flush and the step suite's lead spin, so that the kernel and what follows it are
 * queued before it runs. In a step every kernel runs 0.3-1.8 us longer than the suite times it
 * alone, and the GEMMs queued behind it are what does it: right before it, with or without a spin
 * or an idle gap between, they do not (validation/data/h200-2045-next, h200-2153-gap, h200-2157-behind).
 * Per-token 136's and HashAttention's scans from HBM at 32K, 128K and 256K, and attention over
 * winners just written (a memset after the flush, untimed: as after the step's gather), 8 KV heads
 * at g = 4 and 32 query heads at g = 1, k = 2048; and the radix top-k over 8 rows at the same n,
 * k = 2048, its scores cold both ways, and with its scores rewritten from a second buffer after the
 * flush (";after_scores": a step's top-k reads the scores its scan has just written; a copy, not a
 * memset, since the select's passes depend on the values). The fit reads these rows only for the
 * after-layer terms (validation/fit.c, after_other_work). */
#define AFTER_SPIN_US 110 /* the step suite's lead spin, 100 us + U[0, 20) */
static void sec_after_layer(ks_t *K, queries_t *Q)
{
    const kb_model_t *m = kb_model(K->o->model);
    kb_gemm_t *g = kb_gemm_new(m, 1);
    static const size_t ns[] = {32768, 131072, 262144};
    const size_t nmax = 262144;
    follow_bufs_t fb = follow_bufs_new(K, nmax);
    const int k = 2048;
    size_t wb = (size_t)HEADS * QGROUP * k * 2 * KREF_D * 2;
    uint16_t *win = (uint16_t *)dalloc(wb);
    float *x = (float *)dalloc(8 * nmax * 4), *x2 = (float *)dalloc(8 * nmax * 4);
    kb_make_normal(x2, 8 * nmax, 3.0f, 31, K->s);
    CK(cudaMemcpyAsync(x, x2, 8 * nmax * 4, cudaMemcpyDeviceToDevice, K->s));
    uint32_t *idx = (uint32_t *)dalloc(8 * k * 4);
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
            put(K, &r, time_around(K, [&](cudaStream_t s) { kb_topk(x, 8, n, k, idx, ws, s); }, 20 + n / 1e3, prep,
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
                kb_row_t r = follow_scan_row(kind, n, lay);
                put(K, &r, time_around(K, [&](cudaStream_t s) { follow_scan(K, kind, n, &fb, s); }, 10,
                                       cold, behind),
                    (double)HEADS * n);
            }
        for (int qh = 0; qh < 2; qh++) {
            int heads = qh ? HEADS * QGROUP : HEADS, gq = qh ? 1 : QGROUP, nsp = kb_attn_splits(k, heads);
            void *part = dalloc(kb_attn_part_bytes(heads, nsp, gq));
            auto written = spun([&, heads](cudaStream_t s) {
                CK(cudaMemsetAsync(win, 0x3b, (size_t)heads * k * 2 * KREF_D * 2, s));
            });
            kb_stats_t st = time_around(K, [&](cudaStream_t s) {
                kb_attn_partial(win, (size_t)k * 2 * KREF_D, 2 * KREF_D, KREF_D, Q->q, gq, heads, k, nsp, 0,
                                nsp, part, s);
            }, 10, written, behind);
            snprintf(lay, sizeof lay, "%s;l2;%s", qh ? "interleaved;qh" : "interleaved", what[w]);
            kb_row_t r = attn_row(k, heads, gq, lay);
            put(K, &r, st, (double)heads * k);
            CK(cudaFree(part));
        }
    }
    follow_bufs_free(&fb);
    CK(cudaFree(win));
    CK(cudaFree(x));
    CK(cudaFree(x2));
    CK(cudaFree(idx));
    kb_topk_ws_free(ws);
    kb_gemm_free(g);
}

/* --only behind (a look, not in the full suite): per-token 136's 32K scan from HBM, after an L2
 * flush and the lead spin, with one kind of work queued behind its end event (layout
 * "pertoken;behind:<what>"): which work queued behind a kernel makes it slower, as the layer's
 * GEMMs do (validation/data/h200-2157-behind)? Each of the layer's GEMMs alone, the first four
 * times, two and three of them, four different kernels (mixed4; gemm_qkv_mixed3 with the first
 * GEMM first), and the four after a 1 ms lead (the host done queueing them before the scan runs). */
static void sec_behind(ks_t *K)
{
    const kb_model_t *m = kb_model(K->o->model);
    kb_gemm_t *g = kb_gemm_new(m, 64);
    const size_t n = 32768;
    follow_bufs_t fb = follow_bufs_new(K, n);
    void *buf = dalloc(64 << 20);
    int smem_max = 0;
    CK(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    static const char *const what[] = {"none", "gemm_layer", "gemm_qkv", "gemm_qkv_b64", "smem_max",
                                       "smem_0", "fill_spin", "memset", "copy_d2d", "pdl_empty",
                                       "empty", "gemm_o", "gemm_up", "gemm_down", "gemm_qkv_x4",
                                       "gemm_qkv_o", "gemm_qkv_o_up", "gemm_o_up_down", "mixed4",
                                       "gemm_qkv_mixed3", "gemm_layer;lead:1ms"};
    const int nw = sizeof what / sizeof what[0];
    for (int rep = 0; rep < 2; rep++)
        for (int w = 0; w < nw; w++) {
            /* the last: the lead spin 1 ms, so the host has queued all four GEMMs before the scan runs */
            auto prep = [w, nw](cudaStream_t s) {
                kb_l2_flush(s);
                kb_spin(w == nw - 1 ? 1000 : AFTER_SPIN_US, s);
            };
            auto behind = [&, w](cudaStream_t s) {
                switch (w) {
                case 1: kb_gemm_layer(g, 1, s); break;
                case 2: kb_gemm_run(g, KB_GEMM_QKV, 1, s); break;
                case 3: kb_gemm_run(g, KB_GEMM_QKV, 64, s); break;
                case 4: kb_smem_launch((size_t)smem_max, s); break;
                case 5: kb_smem_launch(0, s); break;
                case 6: kb_fill_spin(5, s); break;
                case 7: CK(cudaMemsetAsync(buf, 1, 64 << 20, s)); break;
                case 8: CK(cudaMemcpyAsync(buf, (char *)buf + (32 << 20), 1 << 20, cudaMemcpyDeviceToDevice, s)); break;
                case 9: kb_pdl_launch(s); break;
                case 10: kb_empty_launch(s); break;
                case 11: kb_gemm_run(g, KB_GEMM_O, 1, s); break;
                case 12: kb_gemm_run(g, KB_GEMM_UP, 1, s); break;
                case 13: kb_gemm_run(g, KB_GEMM_DOWN, 1, s); break;
                case 14:
                    for (int i = 0; i < 4; i++)
                        kb_gemm_run(g, KB_GEMM_QKV, 1, s);
                    break;
                case 15: kb_gemm_run(g, KB_GEMM_QKV, 1, s); kb_gemm_run(g, KB_GEMM_O, 1, s); break;
                case 16:
                    for (int i = KB_GEMM_QKV; i <= KB_GEMM_UP; i++)
                        kb_gemm_run(g, i, 1, s);
                    break;
                case 17:
                    for (int i = KB_GEMM_O; i <= KB_GEMM_DOWN; i++)
                        kb_gemm_run(g, i, 1, s);
                    break;
                case 18:
                case 19:
                    if (w == 19)
                        kb_gemm_run(g, KB_GEMM_QKV, 1, s);
                    else
                        kb_smem_launch((size_t)smem_max, s);
                    kb_fill_spin(1, s);
                    CK(cudaMemsetAsync(buf, 1, 1 << 20, s));
                    kb_empty_launch(s);
                    break;
                case 20: kb_gemm_layer(g, 1, s); break;
                }
            };
            char lay[64];
            snprintf(lay, sizeof lay, "pertoken;behind:%s", what[w]);
            kb_row_t r = follow_scan_row(0, n, lay);
            put(K, &r, time_around(K, [&](cudaStream_t s) { follow_scan(K, 0, n, &fb, s); }, 10, prep,
                                   behind),
                (double)HEADS * n);
        }
    follow_bufs_free(&fb);
    CK(cudaFree(buf));
    kb_gemm_free(g);
}

int kb_suite_kernels(const kb_opts_t *o)
{
    ks_t K;
    memset(&K, 0, sizeof K);
    K.o = o;
    /* 32K and 128K: the step suite's two smallest contexts, so that their stages are predicted
     * from kernels timed at their own n rather than between sizes 4x apart */
    static const size_t full[] = {4096, 16384, 32768, 65536, 131072, 262144, 1048576, 4194304};
    static const size_t quick[] = {4096, 65536, 1048576};
    /* --only index_fetch: the index fetches alone between 1M and 4M (a look at where the SMs'
     * fetch of the plane prefixes slows, back to back and after an L2 flush; no full run) */
    static const size_t fetch_ns[] = {1048576, 1572864, 2097152, 3145728, 4194304};
    bool only_fetch = o->only && !strcmp(o->only, "index_fetch");
    bool only_topk = o->only && !strcmp(o->only, "topk_span");
    bool only_follow = o->only && !strcmp(o->only, "follow");
    /* --only attn: the sparse attention rows alone (both shapes, cold and in L2; no fetch rows) */
    bool only_attn = o->only && !strcmp(o->only, "attn");
    /* --only after_layer: the kernels with a layer's GEMMs queued behind them, and with nothing */
    bool only_layer = o->only && !strcmp(o->only, "after_layer");
    bool only_behind = o->only && !strcmp(o->only, "behind");
    if (o->only && !only_fetch && !only_topk && !only_follow && !only_attn && !only_layer && !only_behind) {
        fprintf(stderr, "kbench: kernels: --only takes index_fetch, topk_span, follow, attn, after_layer or behind\n");
        return 2;
    }
    static const size_t follow_ns[] = {32768};
    static const size_t layer_ns[] = {262144};
    K.ns = only_fetch ? fetch_ns : only_follow || only_attn || only_behind ? follow_ns : only_layer ? layer_ns : o->quick || only_topk ? quick : full;
    K.nn = only_fetch ? 5 : only_topk || only_follow || only_attn || only_layer || only_behind ? 1 : o->quick ? 3 : 8;
    uint64_t seed = (uint64_t)time(NULL);
    fprintf(stderr, "checks: seed %llu\n", (unsigned long long)seed);
    if (kb_checks(seed)) {
        fprintf(stderr, "kbench: kernels: a reference check failed; nothing timed\n");
        return 1;
    }
    K.csv = kb_csv_open(o->out_path, "kernels", "hostalloc (cudaHostAlloc mapped|portable)", o);
    kb_csv_meta(K.csv, "checks", "all kernels passed their C reference checks (seed %llu)",
                (unsigned long long)seed);
    kb_csv_meta(K.csv, "data", "%d KV heads x %d query heads, T = %d, synthetic keys (kref_key)",
                HEADS, QGROUP, T_DEFAULT);
    kb_measure_ceilings(K.csv);
    CK(cudaStreamCreateWithFlags(&K.s, cudaStreamNonBlocking));
    if (kb_layer_data_new(&K.D, K.ns[K.nn - 1], HEADS, QGROUP, T_DEFAULT, 1, seed) != 0)
        kb_die("cannot pin the layer's host data", __FILE__, __LINE__);
    queries_t Q = make_queries(&K);
    if (only_fetch) {
        for (K.flush_fetch = 1; K.flush_fetch <= 2; K.flush_fetch++)
            sec_index_fetch(&K, &Q);
        sec_fetch_plans(&K);
    } else if (only_topk) {
        sec_topk_span(&K);
    } else if (only_follow) {
        sec_follow(&K);
    } else if (only_attn) {
        sec_winners_attn(&K, &Q);   /* n = 32K: below every winner fetch's n, so attention alone */
    } else if (only_layer) {
        sec_after_layer(&K, &Q);
    } else if (only_behind) {
        sec_behind(&K);
    } else {
        sec_launch(&K);
        sec_quantize_flush(&K);
        sec_wf_plan(&K, &Q);
        sec_index_fetch(&K, &Q);
        sec_scans(&K, &Q);
        sec_topk(&K);
        sec_winners_attn(&K, &Q);
        sec_winners_hbm(&K);
        sec_dense_attn(&K, &Q);
        sec_gemm(&K);
        sec_after_layer(&K, &Q);
    }
    free_queries(&Q);
    kb_layer_data_free(&K.D);
    CK(cudaStreamDestroy(K.s));
    kb_csv_close(K.csv);
    return 0;
}
