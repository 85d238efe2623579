/* suite_prefill.cu: prefill chunks over an offloaded context (issue 31), as odsim plans one
 * (models/provider.c, PLAN_PREFILL): every layer of the model runs, on one stream,
 *   the QKV GEMM at batch = the chunk's tokens c;
 *   exact (method dense): the layer's whole K/V copied from pinned host memory into HBM by the copy
 *     engine (one copy a layer on a copy stream, two HBM buffers: layer l + 1's copy runs under
 *     layer l's attention), then the chunk's causal attention over it and its own rows;
 *   sparse (method pertoken136): the layer's per-token 136-bit index copied whole (copy engine), one
 *     scan of it with the chunk's pooled query per KV head, one top-k of U = 8 x k rows per KV head
 *     (odsim's prefill_union), the winners gathered by the SMs from host memory, then the chunk's
 *     attention over the winners and its own rows causally;
 *   the chunk's new K/V flushed to host (device-to-host copy on the copy stream; sparse: its index
 *     rows built and flushed as well);
 *   the O, MLP-up (gate and up) and MLP-down GEMMs at batch c;
 * then the LM head for the chunk's last token. The attention is attn_prefill.cu's tiled kernel.
 *
 * Data: each layer holds its K/V and its per-token index in a pinned host arena of its own (step.cu's
 * layer data) at twice the grid's largest context: the chunk's session in slot 0, the neighbour's in
 * slot 1 (disjoint regions). GEMM weights: one layer's, run 36 times (at batch >= 1K each GEMM
 * reads its weights once either way), and the LM head.
 *
 * Grid: chunks of 1K, 4K and 16K tokens over contexts of 32K and 128K (--quick: 1K and 4K
 * over 16K), exact and sparse, alone and beside one other session's decode steps (the same method at
 * the same context, step.cu's layer step on each layer, looping on a stream of its own from a host
 * thread while the chunk is timed). Rows: op=prefill_chunk, n_tokens = the context before the chunk,
 * chunk_tokens = batch = c, k = the winners per KV head (sparse), pieces = layers, region_bytes =
 * the session's K/V over all layers, bytes_moved = one chunk's bytes over the link (both ways),
 * streams = 1 alone or 2 beside a decode (concurrent_id 0); the neighbour's decode steps go to
 * stderr. Timing: CUDA events on the chunk's stream around each chunk, one chunk untimed first.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kb.h"
#include "gemm.h"
#include "kern.h"
#include "misc.h"
#include "step.h"
#include "ref/kref.h"
#include "ref/scans.h"

#define PF_K 2048
#define PF_UNION 8
#define PF_T 1024
#define PF_TAIL 1024
#define PF_MAX_REPS 5

typedef struct {
    const kb_model_t *m;
    int L, heads, g;
    size_t n_max;                   /* each arena's tokens: two slots of the largest context */
    int c_max;
    kb_layer_data_t *D;
    kb_gemm_t *G, *Gd;              /* the chunk's GEMMs (batch c_max) and the neighbour's view */
    uint16_t *q, *o, *nw, *kvbuf[2], *win;
    uint8_t *idx, *nidx, *h_flush;
    float *qc, *scores;
    uint32_t *sel;
    uint64_t *off;
    kb_topk_ws_t *ws;
    int *dch;
    cudaStream_t s, cs;
    cudaEvent_t *copied, *attended, *qkv_done, flushed;
} pf_t;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *dalloc(size_t bytes)
{
    void *p;
    CK(cudaMalloc(&p, bytes < 16 ? 16 : bytes));
    CK(cudaMemset(p, 0, bytes < 16 ? 16 : bytes));
    return p;
}

static size_t kv_head_bytes(size_t n) { return n * 2 * KREF_D * 2; }
static size_t pt_head_bytes(size_t n) { return n / 64 * kref_pt_block_bytes(32); }

/* One chunk of c tokens after n context tokens, every layer, then the LM head. */
static void chunk(pf_t *X, kb_method_t m, size_t n, int c)
{
    int H = X->heads, g = X->g, W = (int)(PF_UNION * PF_K < n ? PF_UNION * PF_K : n);
    size_t new_hs = (size_t)c * 2 * KREF_D;   /* elements */
    for (int l = 0; l < X->L; l++) {
        const kb_layer_data_t *D = &X->D[l];
        kb_gemm_run(X->G, KB_GEMM_QKV, c, X->s);
        CK(cudaEventRecord(X->qkv_done[l], X->s));
        const uint16_t *ctx;
        size_t ctx_hs, rows;
        if (m == KB_M_DENSE) {
            if (l >= 2)
                CK(cudaStreamWaitEvent(X->cs, X->attended[l - 2], 0));
            CK(cudaMemcpyAsync(X->kvbuf[l % 2], D->h[KB_M_DENSE], H * kv_head_bytes(n), cudaMemcpyHostToDevice, X->cs));
            CK(cudaEventRecord(X->copied[l], X->cs));
            CK(cudaStreamWaitEvent(X->s, X->copied[l], 0));
            ctx = X->kvbuf[l % 2];
            ctx_hs = n * 2 * KREF_D;
            rows = n;
        } else {
            CK(cudaMemcpyAsync(X->idx, D->h[KB_M_PT136], H * pt_head_bytes(n), cudaMemcpyHostToDevice, X->s));
            kb_scan_pertoken(X->idx, pt_head_bytes(n), 32, X->qc, H, n, X->scores, X->s);
            kb_topk(X->scores, H, n, W, X->sel, X->ws, X->s);
            kb_winner_offsets(X->off, X->sel, H, 1, W, 1, kv_head_bytes(n), 2 * KREF_D * 2, 0, X->s);
            kb_gather(2, X->win, D->h[KB_M_DENSE], X->off, (size_t)H * W, 2 * KREF_D * 2, 4 * kb_sm_count(), X->s);
            ctx = X->win;
            ctx_hs = (size_t)W * 2 * KREF_D;
            rows = W;
        }
        kb_attn_prefill(ctx, ctx_hs, rows, X->nw, new_hs, X->q, g, H, c, X->o, X->s);
        CK(cudaEventRecord(X->attended[l], X->s));
        /* the chunk's new rows leave once the QKV GEMM has made them */
        CK(cudaStreamWaitEvent(X->cs, X->qkv_done[l], 0));
        CK(cudaMemcpyAsync(X->h_flush, X->nw, H * kv_head_bytes(c), cudaMemcpyDeviceToHost, X->cs));
        if (m != KB_M_DENSE) {
            kb_build_pertoken(X->q, (size_t)c * KREF_D, H, c, X->dch, 32, X->nidx, pt_head_bytes(c), X->s);
            CK(cudaMemcpyAsync(X->h_flush + H * kv_head_bytes(c), X->nidx, H * pt_head_bytes(c), cudaMemcpyDeviceToHost,
                               X->s));
        }
        for (int i = KB_GEMM_O; i <= KB_GEMM_DOWN; i++)
            kb_gemm_run(X->G, i, c, X->s);
    }
    kb_gemm_run(X->G, KB_GEMM_LM, 1, X->s);
    CK(cudaEventRecord(X->flushed, X->cs));
    CK(cudaStreamWaitEvent(X->s, X->flushed, 0));
}

/* Bytes one chunk moves over the link: K/V (exact) or the index and the winners (sparse) in, the
 * new rows (and their index) out. */
static double chunk_link_bytes(const pf_t *X, kb_method_t m, size_t n, int c)
{
    double W = fmin(PF_UNION * PF_K, (double)n), H = X->heads;
    double in = m == KB_M_DENSE ? H * kv_head_bytes(n) : H * (pt_head_bytes(n) + W * 2 * KREF_D * 2);
    double out = H * kv_head_bytes(c) + (m == KB_M_DENSE ? 0 : H * pt_head_bytes(c));
    return X->L * (in + out);
}

/* The neighbour: decode steps of every layer and the LM head, looped until *stop. */
typedef struct {
    pf_t *X;
    kb_session_t **S;
    cudaStream_t s;
    volatile int *stop;
    int steps;
    double lat_us[4000];
} nb_t;

static void *nb_thread(void *p)
{
    nb_t *a = (nb_t *)p;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    while (!*a->stop && a->steps < 4000) {
        CK(cudaEventRecord(e0, a->s));
        for (int l = 0; l < a->X->L; l++)
            kb_session_step(a->S[l], a->s, NULL);
        kb_gemm_run(a->X->Gd, KB_GEMM_LM, 1, a->s);
        CK(cudaEventRecord(e1, a->s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        a->lat_us[a->steps++] = ms * 1e3;
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return NULL;
}

static void run_case(pf_t *X, kb_csv_t *csv, kb_method_t m, size_t n, int c, int beside, int quick)
{
    nb_t *nb = NULL;
    pthread_t th;
    volatile int stop = 0;
    if (beside) {
        nb = (nb_t *)calloc(1, sizeof *nb);
        nb->X = X;
        nb->stop = &stop;
        nb->S = (kb_session_t **)calloc(X->L, sizeof *nb->S);
        kb_step_cfg_t sc = {m, KB_P_HOST, n, PF_K, 0, PF_TAIL, 1, 1};
        for (int l = 0; l < X->L; l++)
            nb->S[l] = kb_session_new(&X->D[l], &sc, X->Gd);
        CK(cudaStreamCreateWithFlags(&nb->s, cudaStreamNonBlocking));
        pthread_create(&th, NULL, nb_thread, nb);
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    double t[PF_MAX_REPS], t_start = now_s();
    int reps = 0;
    chunk(X, m, n, c);   /* untimed: warms up, and paces the repetitions */
    CK(cudaStreamSynchronize(X->s));
    double first_s = now_s() - t_start;
    int want = quick ? 2 : (first_s > 2.0 ? 2 : first_s > 0.5 ? 3 : PF_MAX_REPS);
    while (reps < want) {
        CK(cudaEventRecord(e0, X->s));
        chunk(X, m, n, c);
        CK(cudaEventRecord(e1, X->s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t[reps++] = ms * 1e3;
    }
    kb_row_t r = kb_row("prefill_chunk", m == KB_M_DENSE ? "exact" : "sparse");
    r.method = kb_method_name(m);
    r.n_tokens = (long long)n;
    r.heads = X->heads;
    r.qheads = X->g;
    r.bits = kb_method_bits(m, X->g);
    r.k = m == KB_M_DENSE ? -1 : (long long)fmin(PF_UNION * PF_K, (double)n);
    r.batch = c;
    r.chunk_tokens = c;
    r.pieces = X->L;
    r.region_bytes = (long long)X->L * X->heads * (long long)kv_head_bytes(n);
    r.placement = "host";
    r.layout = "interleaved";
    r.allocator = "hostalloc";
    r.streams = beside ? 2 : 1;
    r.procs = 1;
    r.concurrent_id = beside ? 0 : -1;
    r.policy = m == KB_M_DENSE ? (beside ? "streams:2;fetch:ce;beside:decode" : "alone;fetch:ce")
                               : (beside ? "streams:2;fetch:ce;winners:sm;beside:decode" : "alone;fetch:ce;winners:sm");
    r.bytes_moved = chunk_link_bytes(X, m, n, c);
    r.st = kb_stats(t, reps);
    r.per_s = 1e6 / r.st.med;
    r.ref_gbps = kb_ceil.h2d_gbps;
    if (beside) {
        stop = 1;
        pthread_join(th, NULL);
        kb_stats_t d = kb_stats(nb->lat_us, nb->steps);
        fprintf(stderr, "prefill: beside %s c=%d n=%zu: the neighbour's decode steps: %d, median %.1f us, p90 %.1f us\n",
                kb_method_name(m), c, n, nb->steps, d.med, d.p90);
        for (int l = 0; l < X->L; l++)
            kb_session_free(nb->S[l]);
        CK(cudaStreamDestroy(nb->s));
        free(nb->S);
        free(nb);
    }
    kb_csv_row(csv, &r);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
}

/* The attention kernel against a double-precision reference on a small case (ragged chunk, GQA,
 * two KV heads); 0 when it agrees. */
static int check_attn(void)
{
    const int H = 2, g = 2, n = 192, c = 100;
    size_t nq = (size_t)H * g * c * KREF_D, nctx = (size_t)H * n * 2 * KREF_D, nnew = (size_t)H * c * 2 * KREF_D;
    uint16_t *hq = (uint16_t *)malloc(nq * 2), *hc = (uint16_t *)malloc(nctx * 2), *hn = (uint16_t *)malloc(nnew * 2),
             *ho = (uint16_t *)malloc(nq * 2);
    uint64_t x = 12345;
    uint16_t *bufs[3] = {hq, hc, hn};
    size_t lens[3] = {nq, nctx, nnew};
    for (int b = 0; b < 3; b++)
        for (size_t i = 0; i < lens[b]; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            float f = ((float)(x >> 40) / (float)(1 << 24) - 0.5f) * (b == 0 ? 1.0f : 2.0f);
            uint32_t u;
            memcpy(&u, &f, 4);
            bufs[b][i] = (uint16_t)(u >> 16);
        }
    uint16_t *dq = (uint16_t *)dalloc(nq * 2), *dc = (uint16_t *)dalloc(nctx * 2), *dn = (uint16_t *)dalloc(nnew * 2),
             *dout = (uint16_t *)dalloc(nq * 2);
    CK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, hc, nctx * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dn, hn, nnew * 2, cudaMemcpyHostToDevice));
    kb_attn_prefill(dc, (size_t)n * 2 * KREF_D, n, dn, (size_t)c * 2 * KREF_D, dq, g, H, c, dout, 0);
    CK(cudaMemcpy(ho, dout, nq * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int qh = 0; qh < H * g; qh++)
        for (int t = 0; t < c; t++) {
            int h = qh / g, rows = n + t + 1;
            double s[512], mx = -1e300, sum = 0, o[KREF_D] = {0};
            for (int r = 0; r < rows; r++) {
                const uint16_t *kr = r < n ? hc + ((size_t)h * n + r) * 2 * KREF_D : hn + ((size_t)h * c + r - n) * 2 * KREF_D;
                double d = 0;
                for (int j = 0; j < KREF_D; j++)
                    d += (double)kref_bf16_to_f32(hq[((size_t)qh * c + t) * KREF_D + j]) * kref_bf16_to_f32(kr[j]);
                s[r] = d;
                mx = fmax(mx, d);
            }
            for (int r = 0; r < rows; r++) {
                const uint16_t *vr = (r < n ? hc + ((size_t)h * n + r) * 2 * KREF_D : hn + ((size_t)h * c + r - n) * 2 * KREF_D) + KREF_D;
                double p = exp2(s[r] - mx);
                sum += p;
                for (int j = 0; j < KREF_D; j++)
                    o[j] += p * kref_bf16_to_f32(vr[j]);
            }
            for (int j = 0; j < KREF_D; j++)
                worst = fmax(worst, fabs(o[j] / sum - kref_bf16_to_f32(ho[((size_t)qh * c + t) * KREF_D + j])));
        }
    fprintf(stderr, "check attn_prefill: max |err| %.4f %s\n", worst, worst < 0.02 ? "ok" : "FAILED");
    void *dev[4] = {dq, dc, dn, dout};
    for (int i = 0; i < 4; i++)
        CK(cudaFree(dev[i]));
    free(hq);
    free(hc);
    free(hn);
    free(ho);
    return worst < 0.02 ? 0 : 1;
}

int kb_suite_prefill(const kb_opts_t *o)
{
    if (o->only) {
        fprintf(stderr, "kbench: prefill: takes no --only\n");
        return 2;
    }
    if (check_attn()) {
        fprintf(stderr, "kbench: prefill: the attention kernel failed its reference check; nothing timed\n");
        return 1;
    }
    static const size_t full_n[] = {32768, 131072}, quick_n[] = {16384};
    static const int full_c[] = {1024, 4096, 16384}, quick_c[] = {1024, 4096};
    const size_t *ns = o->quick ? quick_n : full_n;
    const int *cs = o->quick ? quick_c : full_c;
    int nn = o->quick ? 1 : 2, nc = o->quick ? 2 : 3;
    static const kb_method_t methods[] = {KB_M_DENSE, KB_M_PT136};
    pf_t X;
    memset(&X, 0, sizeof X);
    X.m = kb_model(o->model);
    X.L = X.m->layers;
    X.heads = X.m->kv_heads;
    X.g = X.m->q_heads / X.m->kv_heads;
    X.c_max = cs[nc - 1];
    X.n_max = 2 * ns[nn - 1];
    double t0 = now_s();
    uint64_t seed = (uint64_t)time(NULL);
    X.D = (kb_layer_data_t *)calloc(X.L, sizeof *X.D);
    for (int l = 0; l < X.L; l++)
        if (kb_layer_data_new_for(&X.D[l], X.n_max, X.heads, X.g, PF_T, 0, seed + 7919 * (uint64_t)l,
                                  1u << KB_M_PT136) != 0)
            kb_die("cannot pin the layers' host data", __FILE__, __LINE__);
    fprintf(stderr, "prefill: %d layers' arenas at n_max = %zu built in %.1f s\n", X.L, X.n_max, now_s() - t0);
    X.G = kb_gemm_new(X.m, X.c_max);
    X.Gd = kb_gemm_share(X.G, 1);
    size_t nq = (size_t)X.heads * X.g * X.c_max * KREF_D, n_big = ns[nn - 1];
    int W = PF_UNION * PF_K;
    X.q = (uint16_t *)dalloc(nq * 2);
    kb_make_keys(X.q, (size_t)X.c_max * KREF_D, KREF_D, X.heads * X.g, X.c_max, seed + 5, 0);
    X.o = (uint16_t *)dalloc(nq * 2);
    X.nw = (uint16_t *)dalloc(X.heads * kv_head_bytes(X.c_max));
    kb_make_keys(X.nw, (size_t)X.c_max * 2 * KREF_D, 2 * KREF_D, X.heads, X.c_max, seed + 6, 0);
    kb_make_keys(X.nw + KREF_D, (size_t)X.c_max * 2 * KREF_D, 2 * KREF_D, X.heads, X.c_max, seed + 7, 0);
    for (int i = 0; i < 2; i++)
        X.kvbuf[i] = (uint16_t *)dalloc(X.heads * kv_head_bytes(n_big));
    X.win = (uint16_t *)dalloc((size_t)X.heads * W * 2 * KREF_D * 2);
    X.idx = (uint8_t *)dalloc(X.heads * pt_head_bytes(n_big));
    X.nidx = (uint8_t *)dalloc(X.heads * pt_head_bytes(X.c_max));
    X.qc = (float *)dalloc(X.heads * 32 * 4);
    kb_make_normal(X.qc, X.heads * 32, 1.0f, seed + 8, 0);
    X.scores = (float *)dalloc(X.heads * n_big * 4);
    X.sel = (uint32_t *)dalloc((size_t)X.heads * W * 4);
    X.off = (uint64_t *)dalloc((size_t)X.heads * W * 8);
    X.ws = kb_topk_ws_new(X.heads, X.heads * n_big);
    int chans[32];
    for (int i = 0; i < 32; i++)
        chans[i] = 3 * i;   /* any 32 channels: only the build's cost matters */
    X.dch = (int *)dalloc(sizeof chans);
    CK(cudaMemcpy(X.dch, chans, sizeof chans, cudaMemcpyHostToDevice));
    CK(cudaHostAlloc(&X.h_flush, X.heads * (kv_head_bytes(X.c_max) + pt_head_bytes(X.c_max)), cudaHostAllocDefault));
    CK(cudaStreamCreateWithFlags(&X.s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&X.cs, cudaStreamNonBlocking));
    cudaEvent_t *evs[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        evs[k] = (cudaEvent_t *)calloc(X.L, sizeof(cudaEvent_t));
        for (int l = 0; l < X.L; l++)
            CK(cudaEventCreateWithFlags(&evs[k][l], cudaEventDisableTiming));
    }
    X.copied = evs[0];
    X.attended = evs[1];
    X.qkv_done = evs[2];
    CK(cudaEventCreateWithFlags(&X.flushed, cudaEventDisableTiming));
    CK(cudaDeviceSynchronize());
    kb_csv_t *csv = kb_csv_open(o->out_path, "prefill", "hostalloc (cudaHostAlloc mapped|portable)", o);
    kb_csv_meta(csv, "checks", "attn_prefill agreed with its double-precision reference (seed %llu)",
                (unsigned long long)seed);
    kb_csv_meta(csv, "prefill", "one prefill chunk of %s over an offloaded context: %d layers, each with its own "
                "pinned host arena (K/V and the per-token 136-bit index, n_max = %zu tokens: the chunk's session "
                "in slot 0, a neighbour's in slot 1); per layer QKV GEMM at batch c; exact: the layer's K/V "
                "copied to HBM by the copy engine (double-buffered, one layer ahead), attention of the c queries "
                "over it and their own rows causally (attn_prefill.cu, WMMA flash attention); sparse "
                "(pertoken136): the index copied whole, one scan with the chunk's pooled query per KV head, "
                "top-k of min(%d x %d, n) rows per KV head, winners gathered by the SMs, attention over them "
                "and the chunk; the chunk's new K/V (and index) flushed device-to-host; O, MLP-up, MLP-down "
                "GEMMs at batch c (one layer's weights for every layer); then the LM head at batch 1",
                X.m->name, X.L, X.n_max, PF_UNION, PF_K);
    kb_csv_meta(csv, "sessions", "alone (streams 1), or beside one decode session of the same method at the "
                "same context (streams 2: step.cu's layer step on each layer, k = %d, tail %d, looping on its own "
                "stream from a host thread while the chunk is timed)", PF_K, PF_TAIL);
    kb_csv_meta(csv, "start", "idle: each chunk's first event is recorded after the host waited for the chunk "
                "before; one untimed chunk first");
    kb_measure_ceilings(csv);
    for (int mi = 0; mi < 2; mi++)
        for (int i = 0; i < nn; i++)
            for (int j = 0; j < nc; j++)
                for (int b = 0; b < 2; b++)
                    run_case(&X, csv, methods[mi], ns[i], cs[j], b, o->quick);
    kb_csv_close(csv);
    CK(cudaDeviceSynchronize());
    for (int k = 0; k < 3; k++) {
        for (int l = 0; l < X.L; l++)
            CK(cudaEventDestroy(evs[k][l]));
        free(evs[k]);
    }
    CK(cudaEventDestroy(X.flushed));
    CK(cudaStreamDestroy(X.s));
    CK(cudaStreamDestroy(X.cs));
    void *dev[] = {X.q, X.o, X.nw, X.kvbuf[0], X.kvbuf[1], X.win, X.idx, X.nidx, X.qc, X.scores, X.sel, X.off, X.dch};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        CK(cudaFree(dev[i]));
    kb_topk_ws_free(X.ws);
    CK(cudaFreeHost(X.h_flush));
    kb_gemm_free(X.Gd);
    kb_gemm_free(X.G);
    for (int l = 0; l < X.L; l++)
        kb_layer_data_free(&X.D[l]);
    free(X.D);
    fprintf(stderr, "prefill: done in %.1f s\n", now_s() - t0);
    return 0;
}
