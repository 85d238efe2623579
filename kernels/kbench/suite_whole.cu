/* suite_whole.cu: whole decode steps of the model (issue 31), every layer over host regions of its
 * own, as a decode crosses them: the model's L layers each hold their K/V and their methods' index
 * in a pinned host arena of their own (built once at the grid's largest context), and a step runs
 * the step suite's layer step (step.cu) on each layer in turn, then the LM head, on one stream.
 *
 * Grid: dense (K/V read from host memory), Fathom and SparQ (SM fetch of their plane prefixes) and
 * the per-token 136-bit scan (its index copied by the copy engine), at 32K, 128K and 512K tokens
 * (L x 8 KV heads x 128 x 2 x 2 B = 144 KiB of K/V a token for Qwen3-8B: 72 GiB at 512K, with
 * the indexes 84 GiB of the 128 GiB host); one session, then 2 and 4 sessions as streams of this
 * process (one host thread each) at 32K and 128K, each session in its own slot of every layer's
 * arena (disjoint regions). Where the host cannot pin the 512K arenas the grid stops at 256K.
 *
 * Timing: each session loops whole steps for a window (CUDA events on its stream around each
 * step, the host waiting for its end before the next), at least a minimum of steps; several
 * sessions warm up, start together and step on, unmeasured, until every window has closed (as the
 * concurrency suite does). Rows: op=session_step, one per configuration for one session, else one
 * per session (concurrent_id) and their aggregate (all steps' latencies, the sum of steps per
 * second); pieces = layers, region_bytes = the session's K/V over all layers, bytes_moved = one
 * step's bytes over the link.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kb.h"
#include "checks.h"
#include "gemm.h"
#include "step.h"

#define WH_K 2048
#define WH_TAIL 1024
#define WH_T 1024
#define WH_MAX_SESS 4
#define WH_MAX_STEPS 4000
#define WH_MIN_STEPS 3

typedef struct {
    const kb_opts_t *o;
    kb_csv_t *csv;
    const kb_model_t *m;
    int L;
    size_t n_max;
    kb_layer_data_t *D;        /* L layers' arenas */
    kb_gemm_t **W;             /* L layers' weights; layer 0 also the LM head */
    double window_s;
} wh_t;

/* One session: its L layer steps, their GEMM views, its stream and its measurements. */
typedef struct {
    kb_session_t **S;
    kb_gemm_t **G;             /* G[l] == W[l] for slot 0, else a view with its own handle */
    int slot;
    cudaStream_t s;
    int steps;
    double wall_s, *lat_us;
} wsess_t;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static const kb_method_t METHODS[] = {KB_M_DENSE, KB_M_FATHOM, KB_M_SPARQ, KB_M_PT136};
#define N_METHODS ((int)(sizeof METHODS / sizeof METHODS[0]))

static unsigned method_set(void)
{
    unsigned s = 0;
    for (int i = 0; i < N_METHODS; i++)
        s |= 1u << METHODS[i];
    return s;
}

/* Build every layer's arena at n_max; 0, or -1 (all freed) when the host cannot pin them. */
static int build_layers(wh_t *X, size_t n_max, uint64_t seed)
{
    X->n_max = n_max;
    for (int l = 0; l < X->L; l++)
        if (kb_layer_data_new_for(&X->D[l], n_max, X->m->kv_heads, X->m->q_heads / X->m->kv_heads, WH_T, 0,
                                  seed + 7919 * (uint64_t)l, method_set()) != 0) {
            fprintf(stderr, "whole: cannot pin layer %d's arena at n_max = %zu\n", l, n_max);
            for (int k = 0; k < l; k++)
                kb_layer_data_free(&X->D[k]);
            return -1;
        }
    return 0;
}

static void sess_new(wh_t *X, wsess_t *w, kb_method_t m, size_t n, int slot)
{
    memset(w, 0, sizeof *w);
    w->slot = slot;
    w->S = (kb_session_t **)calloc(X->L, sizeof *w->S);
    w->G = (kb_gemm_t **)calloc(X->L, sizeof *w->G);
    w->lat_us = (double *)malloc(WH_MAX_STEPS * sizeof(double));
    kb_step_cfg_t c = {m, KB_P_HOST, n, WH_K, 0, WH_TAIL, 1, slot};
    for (int l = 0; l < X->L; l++) {
        w->G[l] = slot ? kb_gemm_share(X->W[l], 1) : X->W[l];
        w->S[l] = kb_session_new(&X->D[l], &c, w->G[l]);
    }
    CK(cudaStreamCreateWithFlags(&w->s, cudaStreamNonBlocking));
}

static void sess_free(wh_t *X, wsess_t *w)
{
    for (int l = 0; l < X->L; l++) {
        kb_session_free(w->S[l]);
        if (w->slot)
            kb_gemm_free(w->G[l]);
    }
    CK(cudaStreamDestroy(w->s));
    free(w->S);
    free(w->G);
    free(w->lat_us);
}

/* One decode step: every layer, then the LM head (layer 0's weights). */
static void whole_step(const wh_t *X, wsess_t *w)
{
    for (int l = 0; l < X->L; l++)
        kb_session_step(w->S[l], w->s, NULL);
    kb_gemm_run(w->G[0], KB_GEMM_LM, 1, w->s);
}

typedef struct {
    const wh_t *X;
    wsess_t *w;
    pthread_barrier_t *bar;
    int *closed, n;
} thr_t;

/* Warm up, start with the others, step for the window (and at least WH_MIN_STEPS), then step on
 * unmeasured until every session's window has closed (at most 10 windows more). */
static void *sess_thread(void *p)
{
    thr_t *a = (thr_t *)p;
    const wh_t *X = a->X;
    wsess_t *w = a->w;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    whole_step(X, w);
    CK(cudaStreamSynchronize(w->s));
    pthread_barrier_wait(a->bar);
    double t0 = now_s();
    while (w->steps < WH_MAX_STEPS && (now_s() - t0 < X->window_s || w->steps < WH_MIN_STEPS)) {
        CK(cudaEventRecord(e0, w->s));
        whole_step(X, w);
        CK(cudaEventRecord(e1, w->s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        w->lat_us[w->steps++] = ms * 1e3;
    }
    w->wall_s = now_s() - t0;
    __atomic_add_fetch(a->closed, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(a->closed, __ATOMIC_SEQ_CST) < a->n && now_s() - t0 < 11 * w->wall_s) {
        whole_step(X, w);
        CK(cudaStreamSynchronize(w->s));
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return NULL;
}

static kb_row_t whole_row(const wh_t *X, kb_method_t m, size_t n, int N, char *policy, size_t plen)
{
    kb_row_t r = kb_row("session_step", kb_method_name(m));
    r.method = kb_method_name(m);
    r.n_tokens = (long long)n;
    r.heads = X->m->kv_heads;
    r.qheads = X->m->q_heads / X->m->kv_heads;
    r.bits = kb_method_bits(m, r.qheads);
    r.k = m == KB_M_DENSE ? -1 : WH_K;
    r.batch = 1;
    r.chunk_tokens = WH_T;
    r.pieces = X->L;
    r.region_bytes = (long long)X->L * X->m->kv_heads * (long long)n * 2 * 128 * 2;
    r.placement = "host";
    r.layout = "interleaved;tail=1024";
    r.allocator = "hostalloc";
    r.streams = N;
    r.procs = 1;
    snprintf(policy, plen, "streams:%d;%s", N,
             m == KB_M_DENSE ? "fetch:none" : (m == KB_M_FATHOM || m == KB_M_SPARQ) ? "fetch:sm" : "fetch:ce");
    r.policy = policy;
    r.ref_gbps = kb_ceil.h2d_gbps;
    return r;
}

/* N sessions of method m at n tokens, measured together; their rows. */
static void run_config(wh_t *X, kb_method_t m, size_t n, int N)
{
    wsess_t w[WH_MAX_SESS];
    thr_t a[WH_MAX_SESS];
    pthread_t th[WH_MAX_SESS];
    pthread_barrier_t bar;
    int closed = 0;
    double t_setup = now_s();
    for (int i = 0; i < N; i++)
        sess_new(X, &w[i], m, n, i);
    pthread_barrier_init(&bar, NULL, N);
    for (int i = 0; i < N; i++) {
        a[i] = (thr_t){X, &w[i], &bar, &closed, N};
        pthread_create(&th[i], NULL, sess_thread, &a[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    double link = 0;
    for (int l = 0; l < X->L; l++)
        link += kb_session_link_bytes(w[0].S[l]);
    double *all = (double *)malloc(N * WH_MAX_STEPS * sizeof(double)), rate = 0;
    int na = 0;
    char pol[64];
    for (int i = 0; i <= N; i++) {
        if (i == N && N == 1)
            break;                                  /* one session: its row is the aggregate */
        kb_row_t r = whole_row(X, m, n, N, pol, sizeof pol);
        r.bytes_moved = link;
        if (i < N) {
            memcpy(all + na, w[i].lat_us, w[i].steps * sizeof(double));
            na += w[i].steps;
            r.concurrent_id = N > 1 ? i : -1;
            r.st = kb_stats(w[i].lat_us, w[i].steps);
            r.per_s = w[i].steps / w[i].wall_s;
            rate += r.per_s;
        } else {
            char v[64];
            snprintf(v, sizeof v, "%s_aggregate", kb_method_name(m));
            r.variant = v;
            r.st = kb_stats(all, na);
            r.per_s = rate;
            kb_csv_row(X->csv, &r);
            break;
        }
        kb_csv_row(X->csv, &r);
    }
    free(all);
    for (int i = 0; i < N; i++)
        sess_free(X, &w[i]);
    fprintf(stderr, "whole: %s n=%zu x%d in %.1f s\n", kb_method_name(m), n, N, now_s() - t_setup);
}

int kb_suite_whole(const kb_opts_t *o)
{
    wh_t X;
    memset(&X, 0, sizeof X);
    X.o = o;
    X.m = kb_model(o->model);
    X.L = X.m->layers;
    X.window_s = o->quick ? 0.3 : 1.5;
    if (o->only) {
        fprintf(stderr, "kbench: whole: takes no --only\n");
        return 2;
    }
    uint64_t seed = (uint64_t)time(NULL);
    if (kb_checks(seed)) {
        fprintf(stderr, "kbench: whole: a reference check failed; nothing timed\n");
        return 1;
    }
    double t0 = now_s();
    X.D = (kb_layer_data_t *)calloc(X.L, sizeof *X.D);
    static const size_t full[] = {32768, 131072, 524288}, fallback[] = {32768, 131072, 262144}, quick[] = {16384};
    const size_t *ns = o->quick ? quick : full;
    int nn = o->quick ? 1 : 3;
    size_t streams_n_max = o->quick ? 16384 : 131072;   /* the largest context run as streams */
    if (build_layers(&X, o->quick ? 2 * quick[0] : full[2], seed) != 0) {
        if (o->quick || build_layers(&X, fallback[2], seed) != 0)
            kb_die("cannot pin the layers' host data", __FILE__, __LINE__);
        ns = fallback;
    }
    fprintf(stderr, "whole: %d layers' arenas at n_max = %zu built in %.1f s\n", X.L, X.n_max, now_s() - t0);
    X.W = (kb_gemm_t **)calloc(X.L, sizeof *X.W);
    for (int l = 0; l < X.L; l++)
        X.W[l] = kb_gemm_new_opt(X.m, 1, l == 0);
    X.csv = kb_csv_open(o->out_path, "whole", "hostalloc (cudaHostAlloc mapped|portable)", o);
    kb_csv_meta(X.csv, "checks", "all kernels passed their C reference checks (seed %llu)",
                (unsigned long long)seed);
    kb_csv_meta(X.csv, "whole", "decode steps of %s: %d layers, each with its own pinned host arena (K/V "
                "and index, built at n_max = %zu tokens; a session at n lies in its slot of every arena) "
                "and its own layer weights in HBM, then the LM head; each layer the step suite's layer step: "
                "%d KV heads x %d query heads, k = %d per head, T = %d, tail %d tokens in HBM, GEMMs at "
                "batch 1; fathom reads %d plane bits, sparq r = 16; fathom and sparq fetch their index "
                "with the SMs, pertoken136 with one copy a layer", X.m->name, X.L, X.n_max,
                X.m->kv_heads, X.m->q_heads / X.m->kv_heads, WH_K, WH_T, WH_TAIL, 48);
    kb_csv_meta(X.csv, "start", "idle: each step's first event is recorded on the session's stream "
                "after the host has waited for the step before (as the concurrency suite)");
    kb_csv_meta(X.csv, "sessions", "1, 2 and 4 sessions as streams of one process (one host thread "
                "each), each in its own slot of the arenas (disjoint regions); %.1f s window per "
                "configuration, at least %d steps; the sessions' windows aligned (warmed up before a "
                "common start; stepping on, unmeasured, until every window has closed)",
                X.window_s, WH_MIN_STEPS);
    kb_measure_ceilings(X.csv);
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < N_METHODS; k++)
            run_config(&X, METHODS[k], ns[i], 1);
    for (int N = 2; N <= WH_MAX_SESS; N *= 2)
        for (int i = 0; i < nn && ns[i] <= streams_n_max; i++)
            for (int k = 1; k < N_METHODS; k++)   /* dense's streams would only share the link */
                if ((size_t)N * ns[i] <= X.n_max)
                    run_config(&X, METHODS[k], ns[i], N);
    kb_csv_close(X.csv);
    for (int l = 0; l < X.L; l++) {
        kb_gemm_free(X.W[l]);
        kb_layer_data_free(&X.D[l]);
    }
    free(X.W);
    free(X.D);
    fprintf(stderr, "whole: done in %.1f s\n", now_s() - t0);
    return 0;
}
