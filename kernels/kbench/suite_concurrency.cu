/* suite_concurrency.cu: 1, 2, 4, 8, 16 concurrent sessions, as separate
 * processes (forked before CUDA starts: separate contexts, time-sliced) and
 * as streams of one process (one host thread per session), each looping
 * whole offloaded decode steps (all of the model's layers, then the LM head)
 * on its own host buffers for a fixed wall time.
 *
 * The sessions' windows are aligned: each warms up before a common start,
 * measures c->seconds from it, and then keeps stepping, unmeasured, until
 * every session's window has closed, so that every measured step ran among
 * all N sessions (a session whose window outlasted the others' would
 * otherwise finish alone and faster: with 16 processes some 7 steps per
 * window, one such step put a session's steps per second 16% above the rest).
 *
 * Each session's data is one layer's worth; its layers reuse it (costs are
 * per layer, and one layer's data is far larger than the L2). Rows: one
 * op=session_step per session (its step latency distribution and its steps
 * per second) and one aggregate row per configuration (all steps' latencies,
 * total steps per second).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "kb.h"
#include "step.h"
#include "checks.h"
#include "kern.h"
#include "misc.h"

#define MAX_SESS 16
#define MAX_STEPS 20000

typedef struct {
    size_t n;
    int k, layers;
    double seconds;
    const kb_model_t *m;
} conc_cfg_t;

typedef struct {
    int steps;
    double wall_s;
    double *lat_us;            /* steps entries */
} sess_result_t;

/* Build one session's data and session; NULL data on pin failure. */
typedef struct {
    kb_layer_data_t D;
    kb_session_t *S;
    kb_gemm_t *gemm;
    cudaStream_t s;
} sess_t;

static int sess_new(sess_t *x, const conc_cfg_t *c, uint64_t seed)
{
    memset(x, 0, sizeof *x);
    if (kb_layer_data_new(&x->D, c->n, c->m->kv_heads, c->m->q_heads / c->m->kv_heads, 1024, 0,
                          seed) != 0)
        return -1;
    x->gemm = kb_gemm_new(c->m, 1);
    kb_step_cfg_t sc = {KB_M_FATHOM, KB_P_HOST, c->n, c->k, 0, 1024, 1, 0};
    x->S = kb_session_new(&x->D, &sc, x->gemm);
    CK(cudaStreamCreateWithFlags(&x->s, cudaStreamNonBlocking));
    return 0;
}

static void sess_free(sess_t *x)
{
    kb_session_free(x->S);
    kb_gemm_free(x->gemm);
    kb_layer_data_free(&x->D);
    CK(cudaStreamDestroy(x->s));
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* One decode step of the session: every layer, then the LM head. */
static void session_step(sess_t *x, const conc_cfg_t *c)
{
    for (int l = 0; l < c->layers; l++)
        kb_session_step(x->S, x->s, NULL);
    kb_gemm_run(x->gemm, KB_GEMM_LM, 1, x->s);
}

/* Loop steps for c->seconds; latencies by events on the session's stream. Then count the window
 * closed in *closed and keep stepping until all n windows are (at most 10 windows more). */
static void sess_loop(sess_t *x, const conc_cfg_t *c, sess_result_t *r, int *closed, int n)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    double t0 = now_s();
    r->steps = 0;
    while (r->steps < MAX_STEPS && now_s() - t0 < c->seconds) {
        CK(cudaEventRecord(a, x->s));
        session_step(x, c);
        CK(cudaEventRecord(b, x->s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        r->lat_us[r->steps++] = ms * 1e3;
    }
    r->wall_s = now_s() - t0;
    __atomic_add_fetch(closed, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(closed, __ATOMIC_SEQ_CST) < n && now_s() - t0 < 11 * c->seconds) {
        session_step(x, c);
        CK(cudaStreamSynchronize(x->s));
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
}

static void sess_warm(sess_t *x, const conc_cfg_t *c)
{
    session_step(x, c);
    CK(cudaStreamSynchronize(x->s));
}

/* Child: set up and warm up, say ready, wait for go, loop, send results. Never returns. */
static void child_main(int id, const conc_cfg_t *c, int *closed, int n, int ready_fd, int go_fd, int res_fd)
{
    sess_t x;
    sess_result_t r = {0, 0, (double *)malloc(MAX_STEPS * sizeof(double))};
    char ok = sess_new(&x, c, 100 + id) == 0 ? 'r' : 'f';
    if (ok == 'r')
        sess_warm(&x, c);
    else
        __atomic_add_fetch(closed, 1, __ATOMIC_SEQ_CST);   /* no window to wait for */
    kb_write_all(ready_fd, &ok, 1);
    char go;
    if (ok == 'r' && kb_read_all(go_fd, &go, 1) == 0) {
        sess_loop(&x, c, &r, closed, n);
        sess_free(&x);
    }
    kb_write_all(res_fd, &r.steps, sizeof r.steps);
    kb_write_all(res_fd, &r.wall_s, sizeof r.wall_s);
    kb_write_all(res_fd, r.lat_us, r.steps * sizeof(double));
    _exit(ok == 'r' ? 0 : 3);
}

/* N processes; results into res[0..N). *closed is shared with them (MAP_SHARED). Returns 0, or -1
 * if a child failed. */
static int run_procs(int N, const conc_cfg_t *c, int *closed, sess_result_t *res)
{
    *closed = 0;
    int ready[2], go[2], out[MAX_SESS][2];
    pid_t pid[MAX_SESS];
    if (pipe(ready) || pipe(go))
        return -1;
    for (int i = 0; i < N; i++) {
        if (pipe(out[i]))
            return -1;
        pid[i] = fork();
        if (pid[i] == 0) {
            close(out[i][0]);
            child_main(i, c, closed, N, ready[1], go[0], out[i][1]);
        }
        close(out[i][1]);
    }
    int fail = 0;
    for (int i = 0; i < N; i++) {
        char ok = 'f';
        kb_read_all(ready[0], &ok, 1);
        fail |= ok != 'r';
    }
    char g[MAX_SESS];
    memset(g, 'g', sizeof g);
    kb_write_all(go[1], g, N);
    for (int i = 0; i < N; i++) {
        res[i].lat_us = (double *)malloc(MAX_STEPS * sizeof(double));
        if (kb_read_all(out[i][0], &res[i].steps, sizeof res[i].steps) ||
            kb_read_all(out[i][0], &res[i].wall_s, sizeof res[i].wall_s) ||
            kb_read_all(out[i][0], res[i].lat_us, res[i].steps * sizeof(double)))
            fail = 1;
        close(out[i][0]);
        int st;
        waitpid(pid[i], &st, 0);
        fail |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    close(ready[0]); close(ready[1]); close(go[0]); close(go[1]);
    return fail ? -1 : 0;
}

typedef struct {
    sess_t *x;
    const conc_cfg_t *c;
    sess_result_t *r;
    pthread_barrier_t *bar;
    int *closed, n;
} thr_arg_t;

static void *thr_main(void *p)
{
    thr_arg_t *a = (thr_arg_t *)p;
    pthread_barrier_wait(a->bar);
    sess_loop(a->x, a->c, a->r, a->closed, a->n);
    return NULL;
}

/* N sessions as streams of this process, one host thread each. */
static int run_streams(int N, const conc_cfg_t *c, sess_result_t *res)
{
    sess_t x[MAX_SESS];
    thr_arg_t a[MAX_SESS];
    pthread_t th[MAX_SESS];
    pthread_barrier_t bar;
    int closed = 0;
    for (int i = 0; i < N; i++)
        if (sess_new(&x[i], c, 200 + i) != 0)
            return -1;
    for (int i = 0; i < N; i++)
        sess_warm(&x[i], c);
    pthread_barrier_init(&bar, NULL, N);
    for (int i = 0; i < N; i++) {
        res[i].lat_us = (double *)malloc(MAX_STEPS * sizeof(double));
        a[i] = (thr_arg_t){&x[i], c, &res[i], &bar, &closed, N};
        pthread_create(&th[i], NULL, thr_main, &a[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    for (int i = 0; i < N; i++)
        sess_free(&x[i]);
    return 0;
}

typedef struct {
    int N, procs;
    sess_result_t res[MAX_SESS];
    int ok;
} conc_run_t;

/* A row of op for a session of c (Fathom, its index fetched by the SMs). */
static kb_row_t sess_row(const conc_cfg_t *c, const char *op)
{
    kb_row_t r = kb_row(op, "fathom");
    r.method = "fathom";
    r.n_tokens = (long long)c->n;
    r.heads = c->m->kv_heads;
    r.qheads = c->m->q_heads / c->m->kv_heads;
    r.bits = 56;
    r.k = c->k;
    r.batch = 1;
    r.chunk_tokens = 1024;
    r.placement = "host";
    r.layout = "interleaved;tail=1024";
    r.allocator = "hostalloc";
    return r;
}

static void emit(kb_csv_t *csv, const conc_cfg_t *c, conc_run_t *run)
{
    char pol[64];
    int N = run->N;
    snprintf(pol, sizeof pol, "%s:%d", run->procs ? "procs" : "streams", N);
    double *all = (double *)malloc(N * MAX_STEPS * sizeof(double)), rate = 0;
    int na = 0;
    for (int i = 0; i <= N; i++) {
        kb_row_t r = sess_row(c, "session_step");
        r.streams = run->procs ? 1 : N;
        r.procs = run->procs ? N : 1;
        r.policy = pol;
        r.pieces = c->layers;
        if (i < N) {
            sess_result_t *s = &run->res[i];
            memcpy(all + na, s->lat_us, s->steps * sizeof(double));
            na += s->steps;
            r.concurrent_id = i;
            r.st = kb_stats(s->lat_us, s->steps);
            r.per_s = s->steps / s->wall_s;
            rate += r.per_s;
        } else {
            r.variant = "fathom_aggregate";
            r.st = kb_stats(all, na);
            r.per_s = rate;
        }
        kb_csv_row(csv, &r);
    }
    free(all);
}

int kb_suite_concurrency(const kb_opts_t *o)
{
    conc_cfg_t c;
    c.m = kb_model(o->model);
    c.n = o->quick ? 32768 : 131072;
    c.k = 2048;
    c.layers = c.m->layers;
    c.seconds = o->quick ? 0.5 : 2.5;
    static conc_run_t runs[10];
    int Ns[5] = {1, 2, 4, 8, 16}, nr = 0, fail = 0;
    int *closed = (int *)mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (closed == MAP_FAILED) {
        perror("kbench: concurrency: mmap");
        return 1;
    }
    int top = o->quick ? 3 : 5;
    /* processes first: nothing in this process has touched CUDA yet */
    for (int i = 0; i < top; i++, nr++) {
        runs[nr].N = Ns[i];
        runs[nr].procs = 1;
        runs[nr].ok = run_procs(Ns[i], &c, closed, runs[nr].res) == 0;
        fprintf(stderr, "concurrency: %d processes %s\n", Ns[i], runs[nr].ok ? "done" : "FAILED");
        fail |= !runs[nr].ok;
    }
    munmap(closed, sizeof(int));
    if (kb_checks((uint64_t)time(NULL))) {
        fprintf(stderr, "kbench: concurrency: a reference check failed\n");
        return 1;
    }
    for (int i = 0; i < top; i++, nr++) {
        runs[nr].N = Ns[i];
        runs[nr].procs = 0;
        runs[nr].ok = run_streams(Ns[i], &c, runs[nr].res) == 0;
        fprintf(stderr, "concurrency: %d streams %s\n", Ns[i], runs[nr].ok ? "done" : "FAILED");
        fail |= !runs[nr].ok;
    }
    kb_csv_t *csv = kb_csv_open(o->out_path, "concurrency", "hostalloc (cudaHostAlloc mapped|portable)", o);
    kb_csv_meta(csv, "sessions", "fathom (48 plane bits, SM fetch), n = %zu, k = %d, %d layers + "
                "LM head per step, layer data reused across layers, %.1f s per configuration, the "
                "sessions' windows aligned (warmed up before a common start; stepping on, unmeasured, "
                "until every window has closed)", c.n, c.k, c.layers, c.seconds);
    kb_measure_ceilings(csv);
    for (int i = 0; i < nr; i++)
        if (runs[i].ok)
            emit(csv, &c, &runs[i]);
    kb_csv_close(csv);
    return fail;
}
