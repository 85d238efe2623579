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
    int fill_lead;             /* the lead spin fills the GPU (else one thread) */
    int fixed_lead;            /* the lead spin is not dithered */
    int flush_lead;            /* an L2 flush before the lead spin (as the kernels suite's rows) */
    int long_lead;             /* the lead spin 1 ms: the host has queued the whole step before it ends */
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

/* The spin before a repetition's first event: one thread, or every SM's blocks (as a decode's
 * layer before keeps the GPU, warm). Its length is dithered over 20 us, more than two periods of
 * the copy engine's completion check (0-9 us, kernels/NOTES.md): a fixed sequence of repetitions
 * locks each to one phase of that check, and the median of a stage right after a copy then
 * measures that phase, not the hand-off's spread. */
static void lead_spin(st_t *X)
{
    double us = (X->long_lead ? 1000 : STEP_LEAD_US) + (X->fixed_lead ? 0 : STEP_DITHER_US * dither_u(&X->dither));
    if (X->flush_lead)
        kb_l2_flush(X->s);
    if (X->fill_lead)
        kb_fill_spin(us, X->s);
    else
        kb_spin(us, X->s);
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
    char lpol[64];
    if (X->fill_lead || X->fixed_lead || X->flush_lead || X->long_lead) {
        snprintf(lpol, sizeof lpol, "%s;lead:%s", r.policy,
                 X->fill_lead ? "fill" : X->fixed_lead ? "fixed" : X->flush_lead ? "flush" : "long");
        r.policy = lpol;
    }
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

/* The body's time from an event after a spin (the GPU busy, as in time_steps) to an event after it,
 * over the repetitions more_reps gives a step: `flush`, an L2 flush before each spin; pre() runs
 * after the spin and before the first event, post() behind the second (both untimed). */
template <typename P, typename F, typename Q>
static kb_stats_t time_events(st_t *X, int flush, P pre, F body, Q post)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    static double t[KB_STEP_REPS];
    double spent = 0;
    int r = 0;
    while (more_reps(r, spent, KB_STEP_REPS, X->o->quick)) {
        if (flush)
            kb_l2_flush(X->s);
        lead_spin(X);
        pre();
        CK(cudaEventRecord(a, X->s));
        body();
        CK(cudaEventRecord(b, X->s));
        post();
        CK(cudaStreamSynchronize(X->s));
        CKL();
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t[r] = ms * 1e3;
        spent += t[r++];
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return kb_stats(t, r);
}

/* time_events of the body alone, after one untimed run of it. */
template <typename F> static kb_stats_t time_window(st_t *X, F body, int flush = 0)
{
    body();
    CK(cudaStreamSynchronize(X->s));
    return time_events(X, flush, [] {}, body, [] {});
}

/* --only chain: a layer step with its stage events (the suite's rows), the same layer with none,
 * 36 of them back to back, and those and the LM head (a decode step as the concurrency suite runs
 * it): what the stage events and the layers' chaining take. Policy `<fetch>;no_events`,
 * `<fetch>;layers` (pieces = layers) and `<fetch>;session`. */
static void chain_case(st_t *X, const kb_layer_data_t *D, const kb_step_cfg_t *c)
{
    run_case(X, D, c);
    kb_session_t *S = kb_session_new(D, c, X->gemm);
    static const char *const what[3] = {"no_events", "layers", "session"};
    for (int w = 0; w < 3; w++) {
        int layers = w ? X->m->layers : 1;
        kb_stats_t st = time_window(X, [&]() {
            for (int l = 0; l < layers; l++)
                kb_session_step(S, X->s, NULL);
            if (w == 2)
                kb_gemm_run(X->gemm, KB_GEMM_LM, 1, X->s);
        });
        kb_row_t r = case_row(w == 2 ? "session_step" : "layer_step", c, D->qgroup);
        char pol[64];
        snprintf(pol, sizeof pol, "%s;%s", r.policy, what[w]);
        r.policy = pol;
        r.pieces = layers;
        r.st = st;
        kb_csv_row(X->csv, &r);
    }
    kb_session_free(S);
}

/* The 32K steps of methods ms[3], index in HBM, with the lead spin as the suite's (*lead 0) and
 * then changed (*lead 1). */
static void lead_pairs(st_t *X, const kb_layer_data_t *D, const kb_method_t ms[3], int *lead)
{
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < 3; i++) {
            *lead = f;
            kb_step_cfg_t c = {ms[i], KB_P_HBM, 32768, STEP_K, 0, STEP_TAIL, 1};
            run_case(X, D, &c);
        }
    *lead = 0;
}

/* Stage i of S timed between two events, with the stages of mask `pre` run after the lead spin and
 * before the first event (untimed) and those of mask `post` queued behind the second. */
static kb_stats_t time_between(st_t *X, kb_session_t *S, unsigned pre, int i, unsigned post)
{
    auto stages = [X, S](unsigned mask) {
        for (int j = 0; j < KB_STEP_MAX_STAGES; j++)
            if (mask >> j & 1)
                kb_session_stage(S, X->s, j);
    };
    return time_events(X, 0, [&] { stages(pre); }, [&] { kb_session_stage(S, X->s, i); },
                       [&] { stages(post); });
}

/* --only next: per-token 136's 32K step (index in HBM) as the suite times it, then its scan (the
 * first stage) with nothing, its top-k, the rest of the step, or each later stage alone queued
 * behind its end event, and its attention alone, after its winner fetch, and after the stages
 * before it, with nothing, the rest of the step, the tail or the GEMMs behind (policy
 * `<fetch>;pre:<mask>;post:<mask>`, masks of stage indices): which neighbour makes a stage take its
 * in-step time? */
static void next_case(st_t *X, const kb_layer_data_t *D)
{
    kb_step_cfg_t c = {KB_M_PT136, KB_P_HBM, 32768, STEP_K, 0, STEP_TAIL, 1};
    run_case(X, D, &c);
    kb_session_t *S = kb_session_new(D, &c, X->gemm);
    kb_session_step(S, X->s, NULL);
    const char *ops[KB_STEP_MAX_STAGES];
    int nst = kb_session_stages(S, ops);
    unsigned all = (1u << nst) - 1;
    /* stages: 0 scan, 1 top-k, 2 winner fetch, 3 attention, 4 tail, 5 GEMMs */
    static const struct { unsigned pre; int i; unsigned post; } v[] = {
        {0, 0, 0}, {0, 0, 1u << 1}, {0, 0, ~1u}, {0, 0, 1u << 2}, {0, 0, 1u << 3}, {0, 0, 1u << 4},
        {0, 0, 1u << 5}, {0, 3, 0}, {1u << 2, 3, 0}, {7u, 3, 0}, {7u, 3, ~15u}, {7u, 3, 1u << 4},
        {7u, 3, 1u << 5}};
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        unsigned pre = v[k].pre & all, post = v[k].post & all;
        kb_row_t r = case_row(ops[v[k].i], &c, D->qgroup);
        r.variant = kb_method_name(c.method);
        char pol[64];
        snprintf(pol, sizeof pol, "%s;pre:%x;post:%x", r.policy, pre, post);
        r.policy = pol;
        r.st = time_between(X, S, pre, v[k].i, post);
        kb_csv_row(X->csv, &r);
    }
    kb_session_free(S);
}

/* --only stage: the 32K steps of ms[3] (index in HBM) as the suite times them, then each of their
 * stages alone in the same session, on the same buffers: after the lead spin (policy
 * `<fetch>;stage_alone`) and after an L2 flush and the spin (`<fetch>;stage_flush`). Does a kernel
 * take its in-step time because of where it runs (the session's buffers) or because of what runs
 * before it (the step's other stages)? */
static void stage_alone_case(st_t *X, const kb_layer_data_t *D, kb_method_t m)
{
    kb_step_cfg_t c = {m, KB_P_HBM, 32768, STEP_K, 0, STEP_TAIL, 1};
    run_case(X, D, &c);
    kb_session_t *S = kb_session_new(D, &c, X->gemm);
    kb_session_step(S, X->s, NULL);
    const char *ops[KB_STEP_MAX_STAGES];
    int nst = kb_session_stages(S, ops);
    for (int flush = 0; flush < 2; flush++)
        for (int i = 0; i < nst; i++) {
            kb_stats_t st = time_window(X, [&]() {
                kb_session_stage(S, X->s, i);
            }, flush);
            kb_row_t r = case_row(ops[i], &c, D->qgroup);
            r.variant = kb_method_name(m);
            char pol[64];
            snprintf(pol, sizeof pol, "%s;%s", r.policy, flush ? "stage_flush" : "stage_alone");
            r.policy = pol;
            r.st = st;
            kb_csv_row(X->csv, &r);
        }
    kb_session_free(S);
}

int kb_suite_step(const kb_opts_t *o)
{
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
    if (o->only && !strcmp(o->only, "chain")) {
        for (int p = 0; p < 2; p++) {
            kb_step_cfg_t c = {KB_M_FATHOM, (kb_place_t)p, 131072, STEP_K, 0, STEP_TAIL, 1};
            chain_case(&X, &D, &c);
        }
        nn = 0;
    } else if (o->only && !strcmp(o->only, "lead")) {
        /* the step's first stage after a one-thread spin and after one that fills the GPU */
        static const kb_method_t ms[3] = {KB_M_PT136, KB_M_HASH, KB_M_FATHOM};
        lead_pairs(&X, &D, ms, &X.fill_lead);
        nn = 0;
    } else if (o->only && !strcmp(o->only, "first")) {
        /* the 32K steps whose first stage is a scan from HBM, as the suite times them and with an
         * L2 flush before the lead spin: does the step before leave the first stage slower than
         * the kernels suite's rows (each after a flush) time it? */
        static const kb_method_t ms[3] = {KB_M_PT136, KB_M_HASH, KB_M_LM16};
        lead_pairs(&X, &D, ms, &X.flush_lead);
        nn = 0;
    } else if (o->only && !strcmp(o->only, "dither")) {
        /* the steps whose scan follows a copy-engine index copy, with the lead spin fixed and
         * dithered, one after the other */
        static const kb_method_t ms[5] = {KB_M_PT136, KB_M_PT68, KB_M_HASH, KB_M_LM8, KB_M_LM16};
        for (int i = 0; i < 2; i++)
            for (int m = 0; m < 5; m++)
                for (int f = 1; f >= 0; f--) {
                    X.fixed_lead = f;
                    kb_step_cfg_t c = {ms[m], KB_P_HOST, ns[i], STEP_K, 0, STEP_TAIL, 1};
                    run_case(&X, &D, &c);
                }
        X.fixed_lead = 0;
        nn = 0;
    } else if (o->only && !strcmp(o->only, "long")) {
        /* the 32K steps after a 1 ms lead spin: is a stage slower in the step than alone because the
         * host is still queueing the step's later stages while it runs? */
        static const kb_method_t ms[3] = {KB_M_PT136, KB_M_HASH, KB_M_FATHOM};
        lead_pairs(&X, &D, ms, &X.long_lead);
        nn = 0;
    } else if (o->only && !strcmp(o->only, "next")) {
        next_case(&X, &D);
        nn = 0;
    } else if (o->only && !strcmp(o->only, "stage")) {
        static const kb_method_t ms[3] = {KB_M_PT136, KB_M_HASH, KB_M_FATHOM};
        for (int i = 0; i < 3; i++)
            stage_alone_case(&X, &D, ms[i]);
        nn = 0;
    } else if (o->only) {
        fprintf(stderr, "kbench: step: --only takes chain, lead, first, dither, stage, long or next\n");
        return 2;
    }
    for (int i = 0; i < nn; i++)
        for (int m = 0; m < KB_M_N; m++)
            for (int p = 0; p < 3; p++) {
                kb_step_cfg_t c = {(kb_method_t)m, (kb_place_t)p, ns[i], STEP_K, 0, STEP_TAIL, 1};
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
