/* step.cu: layer data and the per-method layer step (see step.h). */
#include <stdlib.h>
#include <string.h>
#include "kb.h"
#include "kern.h"
#include "misc.h"
#include "step.h"
#include "ref/scans.h"

#define FATHOM_PLANE_BITS 48   /* ~56 bits per token with the scales it brings */
#define SPARQ_R 16             /* 16 channels x 4 bits + scales: 68 bits */

const char *kb_method_name(kb_method_t m)
{
    static const char *n[KB_M_N] = {"dense", "fathom", "sparq", "pertoken136", "pertoken68",
                                    "hashattn", "landmark8", "landmark16"};
    return n[m];
}

const char *kb_place_name(kb_place_t p)
{
    static const char *n[] = {"host", "hbm", "hbm_all"};
    return n[p];
}

int kb_method_bits(kb_method_t m, int qgroup)
{
    switch (m) {
    case KB_M_FATHOM: return FATHOM_PLANE_BITS + 8;
    case KB_M_SPARQ: return 68;
    case KB_M_PT136: return 136;
    case KB_M_PT68: return 68;
    case KB_M_HASH: return 32 * qgroup;
    case KB_M_LM8: return 2 * 128 * 16 / 8;
    case KB_M_LM16: return 2 * 128 * 16 / 16;
    default: return -1;
    }
}

static int page_of(kb_method_t m) { return m == KB_M_LM8 ? 8 : (m == KB_M_LM16 ? 16 : 1); }

/* Bytes per head of method m's data at n tokens (KB_M_DENSE: K/V rows). */
static size_t per_head(kb_method_t m, size_t n, int qgroup, int T)
{
    switch (m) {
    case KB_M_DENSE: return n * 2 * KREF_D * 2;
    case KB_M_FATHOM:
    case KB_M_SPARQ: return n / T * kref_chunk_bytes(T);
    case KB_M_PT136: return n / 64 * kref_pt_block_bytes(32);
    case KB_M_PT68: return n / 64 * kref_pt_block_bytes(16);
    case KB_M_HASH: return (size_t)qgroup * n * 4;
    default: return n / page_of(m) * KREF_LM_PAGE_BYTES;
    }
}

/* The C channels of largest key variance: the per-token index's offline choice. */
static void top_channels(int C, int *chans)
{
    int used[KREF_D] = {0};
    for (int c = 0; c < C; c++) {
        int best = -1;
        for (int j = 0; j < KREF_D; j++)
            if (!used[j] && (best < 0 || kref_key_sigma(j) > kref_key_sigma(best)))
                best = j;
        used[best] = 1;
        chans[c] = best;
    }
}

int kb_layer_data_new(kb_layer_data_t *D, size_t n_max, int heads, int qgroup, int T,
                      int keep_device, uint64_t seed)
{
    return kb_layer_data_new_for(D, n_max, heads, qgroup, T, keep_device, seed, KB_M_ALL);
}

/* Whether method m's index is built: asked for, or shared with one asked for (SparQ reads Fathom's
 * planes); the K/V always. */
static int wanted(unsigned methods, int m)
{
    if (m == KB_M_DENSE)
        return 1;
    if (m == KB_M_FATHOM)
        return (methods & (1u << KB_M_FATHOM | 1u << KB_M_SPARQ)) != 0;
    return m != KB_M_SPARQ && (methods & (1u << m));
}

int kb_layer_data_new_for(kb_layer_data_t *D, size_t n_max, int heads, int qgroup, int T,
                          int keep_device, uint64_t seed, unsigned methods)
{
    memset(D, 0, sizeof *D);
    D->n_max = n_max;
    D->heads = heads;
    D->qgroup = qgroup;
    D->T = T;
    size_t total = 0;
    for (int m = 0; m < KB_M_N; m++) {
        D->per_head[m] = per_head((kb_method_t)m, n_max, qgroup, T);
        if (wanted(methods, m))
            total += D->per_head[m] * heads;
    }
    if (kb_host_alloc(&D->hb, total, KB_HOSTALLOC) != 0)
        return -1;
    uint8_t *p = (uint8_t *)D->hb.ptr;
    for (int m = 0; m < KB_M_N; m++) {
        if (!wanted(methods, m))
            continue;
        D->h[m] = p;
        p += D->per_head[m] * heads;
        CK(cudaMalloc(&D->d[m], D->per_head[m] * heads));
    }
    if (methods & (1u << KB_M_SPARQ)) {
        D->h[KB_M_SPARQ] = D->h[KB_M_FATHOM];
        D->d[KB_M_SPARQ] = D->d[KB_M_FATHOM];
    }
    uint16_t *k;
    CK(cudaMalloc(&k, heads * n_max * KREF_D * 2));
    kb_make_keys(k, n_max * KREF_D, KREF_D, heads, n_max, seed, 0);
    uint16_t *kv = (uint16_t *)D->d[KB_M_DENSE];
    CK(cudaMemcpy2D(kv, 4 * KREF_D, k, 2 * KREF_D, 2 * KREF_D, heads * n_max, cudaMemcpyDeviceToDevice));
    kb_make_keys(kv + KREF_D, n_max * 2 * KREF_D, 2 * KREF_D, heads, n_max, seed + 1000, 0);
    if (D->d[KB_M_FATHOM])
        kb_quantize(k, n_max * KREF_D, heads, n_max, T, D->d[KB_M_FATHOM], D->per_head[KB_M_FATHOM], 0);
    int chans[32], *dch;
    top_channels(32, chans);
    CK(cudaMalloc(&dch, sizeof chans));
    CK(cudaMemcpy(dch, chans, sizeof chans, cudaMemcpyHostToDevice));
    if (D->d[KB_M_PT136])
        kb_build_pertoken(k, n_max * KREF_D, heads, n_max, dch, 32, D->d[KB_M_PT136],
                          D->per_head[KB_M_PT136], 0);
    if (D->d[KB_M_PT68])
        kb_build_pertoken(k, n_max * KREF_D, heads, n_max, dch, 16, D->d[KB_M_PT68],
                          D->per_head[KB_M_PT68], 0);
    if (D->d[KB_M_LM8])
        kb_build_landmark(k, n_max * KREF_D, heads, n_max, 8, D->d[KB_M_LM8], D->per_head[KB_M_LM8], 0);
    if (D->d[KB_M_LM16])
        kb_build_landmark(k, n_max * KREF_D, heads, n_max, 16, D->d[KB_M_LM16], D->per_head[KB_M_LM16], 0);
    if (D->d[KB_M_HASH])
        kb_fill_random(D->d[KB_M_HASH], D->per_head[KB_M_HASH] * heads, seed + 7);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(k));
    CK(cudaFree(dch));
    for (int m = 0; m < KB_M_N; m++) {
        if (m == KB_M_SPARQ || !D->d[m])
            continue;
        CK(cudaMemcpy(D->h[m], D->d[m], D->per_head[m] * heads, cudaMemcpyDeviceToHost));
        if (!keep_device) {
            CK(cudaFree(D->d[m]));
            D->d[m] = NULL;
        }
    }
    if (!keep_device)
        D->d[KB_M_SPARQ] = NULL;
    return 0;
}

void kb_layer_data_free(kb_layer_data_t *D)
{
    for (int m = 0; m < KB_M_N; m++)
        if (m != KB_M_SPARQ && D->d[m])
            CK(cudaFree(D->d[m]));
    kb_host_free(&D->hb);
}

struct kb_session {
    kb_step_cfg_t c;
    const kb_layer_data_t *D;
    kb_gemm_t *gemm;
    int heads, g, rows, kk, P, nsplit, tail_splits, total_splits, attn_heads, attn_g;
    size_t nscore, idx_hs, kv_hs, fetch_bytes;
    const uint8_t *idx;            /* where the scan (or the fetch) reads the index */
    const uint16_t *kv;            /* K/V rows (host or HBM) */
    float *q, *qsum, *qc, *sigma2, *scores, *out, *out_tail;
    uint32_t *qsig, *sel;
    kref_plan_t *plan, *h_plan;
    uint8_t *cmp, *fdst;
    size_t cmp_stride;
    uint64_t *off;
    uint16_t *win, *tail;
    void *part, *part_tail;
    kb_topk_ws_t *ws;
};

static void *dzalloc(size_t bytes)
{
    void *p;
    CK(cudaMalloc(&p, bytes < 16 ? 16 : bytes));
    CK(cudaMemset(p, 0, bytes < 16 ? 16 : bytes));
    return p;
}

static int is_planes(kb_method_t m) { return m == KB_M_FATHOM || m == KB_M_SPARQ; }

static void session_queries(kb_session_t *S)
{
    int heads = S->heads, g = S->g;
    S->q = (float *)dzalloc(heads * g * KREF_D * 4);
    kb_make_normal(S->q, heads * g * KREF_D, 0.0884f, 500 + S->c.n, 0);
    float *hq = (float *)malloc(heads * g * KREF_D * 4), qs[64 * KREF_D] = {0}, s2[KREF_D];
    CK(cudaMemcpy(hq, S->q, heads * g * KREF_D * 4, cudaMemcpyDeviceToHost));
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < g; i++)
            for (int j = 0; j < KREF_D; j++)
                qs[h * KREF_D + j] += hq[(h * g + i) * KREF_D + j];
    for (int j = 0; j < KREF_D; j++)
        s2[j] = kref_key_sigma(j) * kref_key_sigma(j);
    int C = S->c.method == KB_M_PT68 ? 16 : 32, chans[32];
    top_channels(C, chans);
    float qc[64 * 32];
    for (int h = 0; h < heads; h++)
        for (int c = 0; c < C; c++)
            qc[h * C + c] = qs[h * KREF_D + chans[c]];
    uint32_t qsig[512];
    for (int i = 0; i < heads * g; i++)
        qsig[i] = (uint32_t)kref_mix64(900 + i);
    S->qsum = (float *)dzalloc(heads * KREF_D * 4);
    S->qc = (float *)dzalloc(heads * C * 4);
    S->sigma2 = (float *)dzalloc(sizeof s2);
    S->qsig = (uint32_t *)dzalloc(heads * g * 4);
    CK(cudaMemcpy(S->qsum, qs, heads * KREF_D * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(S->qc, qc, heads * C * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(S->sigma2, s2, sizeof s2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(S->qsig, qsig, heads * g * 4, cudaMemcpyHostToDevice));
    free(hq);
}

kb_session_t *kb_session_new(const kb_layer_data_t *D, const kb_step_cfg_t *c, kb_gemm_t *gemm)
{
    kb_session_t *S = (kb_session_t *)calloc(1, sizeof *S);
    kb_method_t m = c->method;
    S->c = *c;
    S->D = D;
    S->gemm = gemm;
    S->heads = D->heads;
    S->g = D->qgroup;
    S->P = page_of(m);
    size_t n = c->n;
    int host_idx = c->place == KB_P_HOST;
    S->idx_hs = per_head(m, n, S->g, D->T);
    S->kv_hs = per_head(KB_M_DENSE, n, S->g, D->T);
    if ((size_t)(c->slot + 1) * n > D->n_max)
        kb_die("a session's slot lies past its layer's data", __FILE__, __LINE__);
    size_t idx_at = (size_t)c->slot * S->heads * S->idx_hs, kv_at = (size_t)c->slot * S->heads * S->kv_hs;
    const uint8_t *idx_base = m == KB_M_DENSE ? NULL : (host_idx ? D->h[m] : D->d[m]);
    if (m != KB_M_DENSE && !idx_base)
        kb_die("the layer's data holds no index of this method", __FILE__, __LINE__);
    S->idx = idx_base ? idx_base + idx_at : NULL;
    S->kv = (const uint16_t *)((c->place == KB_P_HBM_ALL ? D->d[KB_M_DENSE] : D->h[KB_M_DENSE]) + kv_at);
    S->rows = m == KB_M_HASH ? S->heads * S->g : S->heads;
    S->nscore = n / S->P;
    S->kk = c->k / S->P;
    session_queries(S);
    if (m != KB_M_DENSE) {
        S->scores = (float *)dzalloc(S->rows * S->nscore * 4);
        S->sel = (uint32_t *)dzalloc(S->rows * S->kk * 4);
        S->off = (uint64_t *)dzalloc(S->rows * S->kk * 8);
        S->win = (uint16_t *)dzalloc((size_t)S->rows * c->k * 2 * KREF_D * 2);
        S->ws = kb_topk_ws_new(S->rows, (size_t)S->rows * S->nscore);
    }
    if (is_planes(m)) {
        S->plan = (kref_plan_t *)dzalloc(S->heads * sizeof(kref_plan_t));
        CK(cudaHostAlloc(&S->h_plan, S->heads * sizeof(kref_plan_t), cudaHostAllocDefault));
        if (host_idx) {
            S->cmp_stride = (n / D->T * kref_chunk_bytes(D->T) + 15) / 16 * 16;
            S->cmp = (uint8_t *)dzalloc(S->heads * S->cmp_stride);
        }
    } else if (m != KB_M_DENSE && host_idx) {
        S->fdst = (uint8_t *)dzalloc(S->heads * S->idx_hs);
    }
    S->tail = (uint16_t *)dzalloc((size_t)S->heads * c->tail_n * 2 * KREF_D * 2);
    kb_make_keys(S->tail, (size_t)c->tail_n * 2 * KREF_D, KREF_D, S->heads, 2 * (size_t)c->tail_n,
                 77, 0);
    size_t attn_rows = m == KB_M_DENSE ? n : (size_t)c->k;
    S->attn_heads = m == KB_M_HASH ? S->rows : S->heads;
    S->attn_g = m == KB_M_HASH ? 1 : S->g;
    S->nsplit = kb_attn_splits(attn_rows, S->attn_heads);
    S->tail_splits = kb_attn_splits((size_t)c->tail_n, S->heads);
    S->total_splits = S->nsplit + (m == KB_M_HASH ? 0 : S->tail_splits);
    S->part = dzalloc(kb_attn_part_bytes(S->attn_heads, S->total_splits, S->attn_g));
    S->part_tail = dzalloc(kb_attn_part_bytes(S->heads, S->tail_splits, S->g));
    S->out = (float *)dzalloc(S->heads * S->g * KREF_D * 4);
    S->out_tail = (float *)dzalloc(S->heads * S->g * KREF_D * 4);
    CK(cudaDeviceSynchronize());
    return S;
}

void kb_session_free(kb_session_t *S)
{
    void *bufs[] = {S->q, S->qsum, S->qc, S->sigma2, S->scores, S->out, S->out_tail, S->qsig,
                    S->sel, S->plan, S->cmp, S->fdst, S->off, S->win, S->tail, S->part,
                    S->part_tail};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            CK(cudaFree(bufs[i]));
    if (S->h_plan)
        CK(cudaFreeHost(S->h_plan));
    if (S->ws)
        kb_topk_ws_free(S->ws);
    free(S);
}

int kb_session_stages(const kb_session_t *S, const char **ops)
{
    int n = 0;
    kb_method_t m = S->c.method;
    if (m == KB_M_DENSE) {
        ops[n++] = "attn_dense";
    } else {
        if (is_planes(m))
            ops[n++] = "wf_plan";
        if (S->c.place == KB_P_HOST)
            ops[n++] = "index_fetch";
        ops[n++] = "scan";
        ops[n++] = "topk";
        ops[n++] = "winner_fetch";
        ops[n++] = "attn_sparse";
    }
    ops[n++] = "attn_tail";
    if (S->gemm)
        ops[n++] = "gemm";
    return n;
}

/* Fathom/SparQ fetch by 2D copies: one per (head, active channel). */
static void fetch_ce2d(kb_session_t *S, cudaStream_t s)
{
    int T = S->D->T;
    size_t chunks = S->c.n / T;
    CK(cudaMemcpyAsync(S->h_plan, S->plan, S->heads * sizeof(kref_plan_t), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    for (int h = 0; h < S->heads; h++) {
        const kref_plan_t *p = &S->h_plan[h];
        for (int a = 0; a < p->n_active; a++) {
            size_t pb = kref_prefix_bytes(T, p->depth[a]);
            CK(cudaMemcpy2DAsync(S->cmp + h * S->cmp_stride + chunks * p->cum[a], pb,
                                 S->idx + h * S->idx_hs + p->chan[a] * kref_chan_bytes(T),
                                 kref_chunk_bytes(T), pb, chunks, cudaMemcpyHostToDevice, s));
        }
    }
}

static void stage_index(kb_session_t *S, cudaStream_t s)
{
    kb_method_t m = S->c.method;
    int T = S->D->T, host = S->c.place == KB_P_HOST;
    if (is_planes(m)) {
        kb_wf_plan(S->q, S->g, S->sigma2, S->heads, m == KB_M_SPARQ ? 4 * SPARQ_R : FATHOM_PLANE_BITS,
                   m == KB_M_SPARQ ? 1 : 4, T, S->plan, s);
        return;
    }
    if (host)
        CK(cudaMemcpyAsync(S->fdst, S->idx, S->heads * S->idx_hs, cudaMemcpyHostToDevice, s));
}

static void stage_fetch_planes(kb_session_t *S, cudaStream_t s)
{
    if (S->c.fetch_ce2d)
        fetch_ce2d(S, s);
    else
        kb_fetch_prefix_sm(S->idx, S->idx_hs, S->cmp, S->cmp_stride, S->plan, S->heads, S->c.n,
                           S->D->T, 4 * kb_sm_count(), s);
}

static void stage_scan(kb_session_t *S, cudaStream_t s)
{
    kb_method_t m = S->c.method;
    int host = S->c.place == KB_P_HOST;
    const uint8_t *idx = host ? S->fdst : S->idx;
    size_t n = S->c.n;
    switch (m) {
    case KB_M_FATHOM:
    case KB_M_SPARQ:
        kb_scan_planes(3, host ? S->cmp : S->idx, host ? S->cmp_stride : S->idx_hs, host, S->plan,
                       S->qsum, 1, S->heads, n, S->D->T, S->scores, s);
        break;
    case KB_M_PT136:
    case KB_M_PT68:
        kb_scan_pertoken(idx, S->idx_hs, m == KB_M_PT68 ? 16 : 32, S->qc, S->heads, n, S->scores, s);
        break;
    case KB_M_HASH:
        kb_scan_hash((const uint32_t *)idx, S->qsig, S->rows, n, S->scores, s);
        break;
    default:
        kb_scan_landmark(idx, S->idx_hs, S->qsum, S->heads, S->nscore, S->scores, s);
        break;
    }
}

static void stage_winners(kb_session_t *S, cudaStream_t s)
{
    int group = S->c.method == KB_M_HASH ? S->g : 1;
    size_t piece = (size_t)S->P * 2 * KREF_D * 2;
    kb_winner_offsets(S->off, S->sel, S->rows, group, S->kk, 1, S->kv_hs, piece, 0, s);
    kb_gather(2, S->win, S->kv, S->off, (size_t)S->rows * S->kk, piece, 4 * kb_sm_count(), s);
}

static void stage_attend(kb_session_t *S, cudaStream_t s)
{
    if (S->c.method == KB_M_DENSE)
        kb_attn_partial(S->kv, S->kv_hs / 2, 2 * KREF_D, KREF_D, S->q, S->g, S->heads, S->c.n,
                        S->nsplit, 0, S->total_splits, S->part, s);
    else
        kb_attn_partial(S->win, (size_t)S->c.k * 2 * KREF_D, 2 * KREF_D, KREF_D, S->q, S->attn_g,
                        S->attn_heads, S->c.k, S->nsplit, 0, S->total_splits, S->part, s);
}

/* The dense window: merged into the same softmax, except for HashAttention
 * whose per-query-head rows differ (its tail is combined on its own). */
static void stage_tail(kb_session_t *S, cudaStream_t s)
{
    size_t hs = (size_t)S->c.tail_n * 2 * KREF_D;
    if (S->c.method == KB_M_HASH) {
        kb_attn_combine(S->part, 1, S->attn_heads, S->total_splits, S->out, s);
        kb_attn_partial(S->tail, hs, 2 * KREF_D, KREF_D, S->q, S->g, S->heads, S->c.tail_n,
                        S->tail_splits, 0, S->tail_splits, S->part_tail, s);
        kb_attn_combine(S->part_tail, S->g, S->heads, S->tail_splits, S->out_tail, s);
        return;
    }
    kb_attn_partial(S->tail, hs, 2 * KREF_D, KREF_D, S->q, S->g, S->heads, S->c.tail_n,
                    S->tail_splits, S->nsplit, S->total_splits, S->part, s);
    kb_attn_combine(S->part, S->g, S->heads, S->total_splits, S->out, s);
}

void kb_session_step(kb_session_t *S, cudaStream_t s, cudaEvent_t *ev)
{
    int i = 0;
    kb_method_t m = S->c.method;
#define MARK()                                                                                     \
    do {                                                                                           \
        if (ev)                                                                                    \
            CK(cudaEventRecord(ev[i], s));                                                         \
        i++;                                                                                       \
    } while (0)
    if (m != KB_M_DENSE) {
        stage_index(S, s);
        if (is_planes(m)) {
            MARK();
            if (S->c.place == KB_P_HOST) {
                stage_fetch_planes(S, s);
                MARK();
            }
        } else if (S->c.place == KB_P_HOST) {
            MARK();
        }
        stage_scan(S, s);
        MARK();
        kb_topk(S->scores, S->rows, S->nscore, S->kk, S->sel, S->ws, s);
        MARK();
        stage_winners(S, s);
        MARK();
    }
    stage_attend(S, s);
    MARK();
    stage_tail(S, s);
    MARK();
    if (S->gemm) {
        kb_gemm_layer(S->gemm, S->c.batch, s);
        MARK();
    }
#undef MARK
}

double kb_session_link_bytes(const kb_session_t *S)
{
    kb_method_t m = S->c.method;
    double kvb = (double)S->rows * S->c.k * 2 * KREF_D * 2;
    if (m == KB_M_DENSE)
        return S->c.place == KB_P_HBM_ALL ? 0 : (double)S->heads * S->kv_hs;
    double win = S->c.place == KB_P_HBM_ALL ? 0 : kvb;
    if (S->c.place != KB_P_HOST)
        return win;
    if (!is_planes(m))
        return win + (double)S->heads * S->idx_hs;
    kref_plan_t p[64];
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(p, S->plan, S->heads * sizeof(kref_plan_t), cudaMemcpyDeviceToHost));
    double b = 0;
    for (int h = 0; h < S->heads; h++)
        b += (double)(S->c.n / S->D->T) * p[h].chunk_prefix_bytes;
    return win + b;
}
