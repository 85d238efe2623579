/* suite_kernels_attn.cu: the kernels suite's winner fetches (host and HBM) and split-K attention
 * rows (sparse over winners, dense, tail and the combine). */
#include <stdlib.h>
#include <string.h>
#include "kern.h"
#include "misc.h"
#include "suite_kernels.h"

/* The row of sparse attention over k winners of `heads` heads with g queries each, in HBM. */
kb_row_t ks_attn_row(int k, int heads, int g, const char *layout)
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
    void *part = ks_dalloc(kb_attn_part_bytes(heads, ns, g));
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
    kb_row_t r = ks_attn_row(k, heads, g, layouts[qh][l2]);
    ks_put(K, &r, st, (double)heads * k);
    CK(cudaFree(part));
}

/* Winner fetch from host K/V by layout, then sparse attention over winners. */
void ks_sec_winners_attn(ks_t *K, queries_t *Q)
{
    int kmax = 4096, ks[] = {256, 1024, 2048, 4096};
    uint32_t *idx = (uint32_t *)ks_dalloc(HEADS * kmax * 4);
    uint64_t *off = (uint64_t *)ks_dalloc(HEADS * kmax * 2 * 8);
    size_t win_bytes = (size_t)HEADS * QGROUP * kmax * 2 * KREF_D * 2;   /* the query heads' own */
    uint16_t *win = (uint16_t *)ks_dalloc(win_bytes);
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
                ks_put(K, &r, st, (double)HEADS * k);
            }
    }
    /* sparse attention over the gathered rows: cold, and just rewritten (in L2) */
    uint16_t *win2 = (uint16_t *)ks_dalloc(win_bytes);
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
void ks_sec_winners_hbm(ks_t *K)
{
    static const size_t ns[] = {65536, 262144, 1048576, 4194304};
    int ks[] = {256, 1024, 2048, 4096, 8192}, kmax = 8192;
    size_t nmax = K->o->quick ? 262144 : 4194304, piece = 512;
    float *kv = (float *)ks_dalloc((size_t)HEADS * nmax * piece);
    kb_make_normal(kv, (size_t)HEADS * nmax * piece / 4, 1.0f, 37, K->s);
    uint32_t *idx = (uint32_t *)ks_dalloc((size_t)HEADS * kmax * 4);
    uint64_t *off = (uint64_t *)ks_dalloc((size_t)HEADS * kmax * 8);
    void *win = ks_dalloc((size_t)HEADS * kmax * piece);
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
            ks_put(K, &r, st, (double)HEADS * k);
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
    void *part = ks_dalloc(kb_attn_part_bytes(HEADS, ns, QGROUP));
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
    ks_put(K, &r, st, (double)HEADS * n);
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
    void *part = ks_dalloc(kb_attn_part_bytes(HEADS, tss[nts - 1], QGROUP));
    float *out = (float *)ks_dalloc(HEADS * QGROUP * KREF_D * 4);
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
            ks_put(K, &r, st, (double)HEADS * QGROUP * ts);
        }
    CK(cudaFree(part));
    CK(cudaFree(out));
}

void ks_sec_dense_attn(ks_t *K, queries_t *Q)
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
