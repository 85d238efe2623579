/* suite_step.cu: one whole offloaded attention layer step per method, at n
 * from 32K to 4M tokens, index and K/V on the host or in HBM.
 *
 * Rows: one op=layer_step row per case (total time, bytes over the link) and
 * one row per stage (op = the stage's op kind, policy in_step), every row
 * carrying method, bits, k, n, placement, layout, policy and the fetch path
 * so the simulator can rebuild the case. The step runs on one stream with the
 * model's layer GEMMs at batch 1.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kb.h"
#include "checks.h"
#include "kern.h"
#include "misc.h"
#include "step.h"

#define HEADS_DEFAULT_T 1024
#define STEP_K 2048
#define STEP_TAIL 1024
#define STEP_LEAD_US 100   /* the spin before each repetition's first event */
#define STEP_DITHER_US 20  /* ... plus up to this much, drawn anew each repetition */

typedef struct {
    const kb_opts_t *o;
    kb_csv_t *csv;
    cudaStream_t s;
    kb_gemm_t *gemm;
    const kb_model_t *m;
    uint64_t dither;           /* splitmix64 state of the dither */
} st_t;

/* uniform on [0, 1) from splitmix64 */
static double dither_u(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

/* The spin before a repetition's first event: one thread (as a decode's layer before keeps the
 * GPU busy). Its length is dithered over 20 us, more than two periods of
 * the copy engine's completion check (0-9 us, kernels/NOTES.md): a fixed sequence of repetitions
 * locks each to one phase of that check, and the median of a stage right after a copy then
 * measures that phase, not the hand-off's spread. */
static void lead_spin(st_t *X)
{
    kb_spin(STEP_LEAD_US + STEP_DITHER_US * dither_u(&X->dither), X->s);
}

/* A step's repetitions: up to KB_STEP_REPS within half a second of steps, and at least
 * KB_STEP_MIN_REPS unless that takes over 3 s of steps (dense reads of 1M-4M tokens from host
 * memory); never fewer than 3. The p99 (interpolated at 0.99 (n - 1)) of 1000 is about the 11th
 * largest, where 300 gave the 4th and the 26-40 of a 5-10 ms step little short of the maximum: a
 * stray delay in 1% of the repetitions moves it less (the quantile's standard error,
 * sqrt(0.99 * 0.01 / n), is 0.31 points against 0.57 at 300). */
#define KB_STEP_REPS 1000
#define KB_STEP_MIN_REPS 100
static int more_reps(int r, double spent_us, int max_reps, int quick)
{
    if (r >= max_reps) return 0;
    if (r < 3) return 1;
    if (quick) return spent_us < 0.1e6;
    return spent_us < 0.5e6 || (r < KB_STEP_MIN_REPS && spent_us * (r + 1) / r < 3e6);
}

/* Run the session's step reps times; t[stage][rep] stage durations and
 * total[rep], microseconds. Returns the repetitions done. */
static int time_steps(st_t *X, kb_session_t *S, int nst, double **t, double *total, int max_reps)
{
    cudaEvent_t ev[KB_STEP_MAX_STAGES + 1];
    for (int i = 0; i <= nst; i++)
        CK(cudaEventCreate(&ev[i]));
    for (int w = 0; w < 2; w++)
        kb_session_step(S, X->s, NULL);
    CK(cudaStreamSynchronize(X->s));
    double spent = 0;
    int r = 0;
    while (more_reps(r, spent, max_reps, X->o->quick)) {
        /* the GPU busy as the window opens, as the layer before keeps it in a decode: the first
         * stage is timed from the GPU's readiness, not from the host's launch after an idle wait
         * (4-16 us more, p90 up to 50, and varying: validation/data/h200/README.md) */
        lead_spin(X);
        CK(cudaEventRecord(ev[0], X->s));
        kb_session_step(S, X->s, ev + 1);
        CK(cudaEventSynchronize(ev[nst]));
        CKL();
        float ms;
        CK(cudaEventElapsedTime(&ms, ev[0], ev[nst]));
        total[r] = ms * 1e3;
        spent += total[r];
        for (int i = 0; i < nst; i++) {
            CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
            t[i][r] = ms * 1e3;
        }
        r++;
    }
    for (int i = 0; i <= nst; i++)
        CK(cudaEventDestroy(ev[i]));
    return r;
}

static kb_row_t case_row(const char *op, const kb_step_cfg_t *c, int qgroup)
{
    kb_row_t r = kb_row(op, kb_method_name(c->method));
    static char layout[96];
    r.method = kb_method_name(c->method);
    r.n_tokens = (long long)c->n;
    r.heads = 8;
    r.qheads = qgroup;
    r.bits = kb_method_bits(c->method, qgroup);
    r.k = c->method == KB_M_DENSE ? -1 : c->k;
    r.batch = c->batch;
    r.chunk_tokens = HEADS_DEFAULT_T;
    r.placement = kb_place_name(c->place);
    r.region_bytes = (long long)(8 * c->n * 512);
    snprintf(layout, sizeof layout, "%s;tail=%d",
             c->method == KB_M_LM8 ? "interleaved;page8"
             : c->method == KB_M_LM16 ? "interleaved;page16"
                                      : "interleaved",
             c->tail_n);
    r.layout = layout;
    r.allocator = "hostalloc";
    r.streams = 1;
    r.procs = 1;
    r.policy = c->method == KB_M_FATHOM || c->method == KB_M_SPARQ
                   ? (c->place != KB_P_HOST ? "fetch:none" : c->fetch_ce2d ? "fetch:ce2d" : "fetch:sm")
                   : (c->place == KB_P_HOST && c->method != KB_M_DENSE ? "fetch:ce" : "fetch:none");
    return r;
}

static void run_case(st_t *X, const kb_layer_data_t *D, const kb_step_cfg_t *c)
{
    kb_session_t *S = kb_session_new(D, c, X->gemm);
    const char *ops[KB_STEP_MAX_STAGES];
    int nst = kb_session_stages(S, ops), max_reps = X->o->quick ? 30 : KB_STEP_REPS;
    double *t[KB_STEP_MAX_STAGES], total[KB_STEP_REPS];
    for (int i = 0; i < nst; i++)
        t[i] = (double *)malloc(max_reps * sizeof(double));
    int reps = time_steps(X, S, nst, t, total, max_reps);
    double link = kb_session_link_bytes(S);
    kb_row_t r = case_row("layer_step", c, D->qgroup);
    r.st = kb_stats(total, reps);
    r.bytes_moved = link;
    r.per_s = 1e6 / r.st.med;
    r.ref_gbps = kb_ceil.h2d_gbps;
    kb_csv_row(X->csv, &r);
    for (int i = 0; i < nst; i++) {
        kb_row_t sr = case_row(ops[i], c, D->qgroup);
        sr.variant = kb_method_name(c->method);
        sr.st = kb_stats(t[i], reps);
        char pol[64];
        snprintf(pol, sizeof pol, "in_step;%s", r.policy);
        sr.policy = pol;
        kb_csv_row(X->csv, &sr);
        free(t[i]);
    }
    kb_session_free(S);
}

int kb_suite_step(const kb_opts_t *o)
{
    if (o->only) {
        fprintf(stderr, "kbench: step: takes no --only\n");
        return 2;
    }
    st_t X;
    memset(&X, 0, sizeof X);
    X.o = o;
    X.m = kb_model(o->model);
    X.dither = 0x6f6473696dull;
    uint64_t seed = (uint64_t)time(NULL);
    if (kb_checks(seed)) {
        fprintf(stderr, "kbench: step: a reference check failed; nothing timed\n");
        return 1;
    }
    X.csv = kb_csv_open(o->out_path, "step", "hostalloc (cudaHostAlloc mapped|portable)", o);
    kb_csv_meta(X.csv, "checks", "all kernels passed their C reference checks (seed %llu)",
                (unsigned long long)seed);
    kb_csv_meta(X.csv, "step", "one layer of %s: %d KV heads x %d query heads, k = %d per head "
                "(hashattn: per query head), T = %d, tail %d tokens, layer GEMMs at batch 1; "
                "fathom reads %d plane bits (bits column counts ~8 bits of scales), sparq r = 16",
                X.m->name, X.m->kv_heads, X.m->q_heads / X.m->kv_heads, STEP_K, HEADS_DEFAULT_T,
                STEP_TAIL, 48);
    kb_csv_meta(X.csv, "start", "busy: each repetition starts with the GPU busy (a %d us spin kernel "
                "before its first event), so its first stage is timed as inside a busy stream", STEP_LEAD_US);
    kb_csv_meta(X.csv, "dither", "the spin runs %d us more, drawn uniformly anew each repetition "
                "(splitmix64, fixed seed), so a stage after a copy meets the copy engine's completion "
                "check at every phase", STEP_DITHER_US);
    kb_measure_ceilings(X.csv);
    CK(cudaStreamCreateWithFlags(&X.s, cudaStreamNonBlocking));
    X.gemm = kb_gemm_new(X.m, 1);
    static const size_t full[] = {32768, 131072, 524288, 1048576, 2097152, 4194304};
    static const size_t quick[] = {32768, 1048576};
    const size_t *ns = o->quick ? quick : full;
    int nn = o->quick ? 2 : 6;
    kb_layer_data_t D;
    if (kb_layer_data_new(&D, ns[nn - 1], X.m->kv_heads, X.m->q_heads / X.m->kv_heads,
                          HEADS_DEFAULT_T, 1, seed) != 0)
        kb_die("cannot pin the layer's host data", __FILE__, __LINE__);
    for (int i = 0; i < nn; i++)
        for (int m = 0; m < KB_M_N; m++)
            for (int p = 0; p < 3; p++) {
                kb_step_cfg_t c = {(kb_method_t)m, (kb_place_t)p, ns[i], STEP_K, 0, STEP_TAIL, 1, 0};
                if (m == KB_M_DENSE && p == KB_P_HBM)
                    continue;                         /* dense has no index */
                run_case(&X, &D, &c);
                if ((m == KB_M_FATHOM || m == KB_M_SPARQ) && p == KB_P_HOST) {
                    c.fetch_ce2d = 1;
                    run_case(&X, &D, &c);
                }
            }
    kb_layer_data_free(&D);
    kb_gemm_free(X.gemm);
    CK(cudaStreamDestroy(X.s));
    kb_csv_close(X.csv);
    return 0;
}
