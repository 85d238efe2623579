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
#include "misc.h"
#include "checks.h"
#include "suite_kernels.h"

void ks_put(ks_t *K, kb_row_t *r, kb_stats_t st, double ops)
{
    r->st = st;
    if (ops > 0 && st.med > 0)
        r->per_s = ops / (st.med * 1e-6);
    kb_csv_row(K->csv, r);
}

void *ks_dalloc(size_t bytes)
{
    void *p;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, 0x3b, bytes));
    return p;
}

static queries_t make_queries(ks_t *K)
{
    queries_t Q;
    Q.q = (float *)ks_dalloc(HEADS * QGROUP * KREF_D * 4);
    Q.qsum = (float *)ks_dalloc(HEADS * KREF_D * 4);
    Q.sigma2 = (float *)ks_dalloc(KREF_D * 4);
    Q.plan = (kref_plan_t *)ks_dalloc(HEADS * sizeof(kref_plan_t));
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

int kb_suite_kernels(const kb_opts_t *o)
{
    ks_t K;
    memset(&K, 0, sizeof K);
    K.o = o;
    /* 32K and 128K: the step suite's two smallest contexts, so that their stages are predicted
     * from kernels timed at their own n rather than between sizes 4x apart */
    static const size_t full[] = {4096, 16384, 32768, 65536, 131072, 262144, 1048576, 4194304};
    static const size_t quick[] = {4096, 65536, 1048576};
    /* --only attn: the sparse attention rows alone (both shapes, cold and in L2; no fetch rows);
     * --only after_layer: the kernels with a layer's GEMMs queued behind them, and with nothing */
    bool only_attn = o->only && !strcmp(o->only, "attn");
    bool only_layer = o->only && !strcmp(o->only, "after_layer");
    if (o->only && !only_attn && !only_layer) {
        fprintf(stderr, "kbench: kernels: --only takes attn or after_layer\n");
        return 2;
    }
    static const size_t attn_ns[] = {32768};
    static const size_t layer_ns[] = {262144};
    K.ns = only_attn ? attn_ns : only_layer ? layer_ns : o->quick ? quick : full;
    K.nn = o->only ? 1 : o->quick ? 3 : 8;
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
    if (only_attn) {
        ks_sec_winners_attn(&K, &Q);   /* n = 32K: below every winner fetch's n, so attention alone */
    } else if (only_layer) {
        ks_sec_after_layer(&K, &Q);
    } else {
        ks_sec_launch(&K);
        ks_sec_quantize_flush(&K);
        ks_sec_wf_plan(&K, &Q);
        ks_sec_index_fetch(&K, &Q);
        ks_sec_scans(&K, &Q);
        ks_sec_topk(&K);
        ks_sec_winners_attn(&K, &Q);
        ks_sec_winners_hbm(&K);
        ks_sec_dense_attn(&K, &Q);
        ks_sec_gemm(&K);
        ks_sec_after_layer(&K, &Q);
    }
    free_queries(&Q);
    kb_layer_data_free(&K.D);
    CK(cudaStreamDestroy(K.s));
    kb_csv_close(K.csv);
    return 0;
}
