/* timeslice.cu: how the GPU time-slices separate CUDA contexts (no MPS).
 *
 * N processes, forked before this process starts CUDA, each spin on the GPU for a fixed time of
 * their own; one thread logs, from the globaltimer, every gap during which its context was switched
 * out. The runs between gaps are the time slice; a gap holds the other N-1 contexts' slices and the
 * N switches of a round: gap = (N-1)*slice + N*switch. Two loads: one thread (variants run, gap),
 * and the whole GPU (run_full, gap_full: 4 blocks of 256 threads per SM, 48 KiB of shared memory
 * each), whose switch saves and restores every resident block's state as a decode kernel's does.
 * Rows (link suite): op=timeslice, procs N.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "kb.h"
#include "timeslice.h"

#define TS_MAX_GAPS 4096
#define TS_GAP_NS 10000ull          /* a pause longer than this is a switch-out */
#define TS_OWN_NS 300000000ull      /* each process spins 300 ms of its own time */

static __device__ __forceinline__ unsigned long long gtimer(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Every thread spins until own_ns of running time (shared memory kept live); thread 0 of block 0
 * logs the gaps [last seen, first seen again). */
__global__ void spin_log_kernel(unsigned long long own_ns, unsigned long long *log, int max, int *n_out)
{
    extern __shared__ unsigned int pad[];
    bool logger = blockIdx.x == 0 && threadIdx.x == 0;
    unsigned long long last = gtimer(), own = 0;
    int n = 0;
    while (own < own_ns) {
        unsigned long long t = gtimer(), d = t - last;
        if (d > TS_GAP_NS) {
            if (logger && n < max) {
                log[2 * n] = last;
                log[2 * n + 1] = t;
            }
            n++;
        } else {
            own += d;
        }
        last = t;
        pad[threadIdx.x] += (unsigned int)d;
    }
    if (logger)
        *n_out = (n < max ? n : max) + (pad[0] == 0xffffffffu);   /* pad read: kept live */
}

/* Child: start CUDA, say ready, wait for go, spin own_ns of its own time (one thread, or the whole
 * GPU), send the gap log. Never returns. */
static void child(int full, unsigned long long own_ns, int ready_fd, int go_fd, int res_fd)
{
    unsigned long long *dlog;
    int *dn, n = 0;
    static unsigned long long log[2 * TS_MAX_GAPS];
    CK(cudaMalloc(&dlog, sizeof log));
    CK(cudaMalloc(&dn, sizeof(int)));
    char c = 'r';
    kb_write_all(ready_fd, &c, 1);
    if (kb_read_all(go_fd, &c, 1) == 0) {
        int blocks = full ? 4 * kb_sm_count() : 1, threads = full ? 256 : 1;
        size_t smem = full ? 48 * 1024 : sizeof(unsigned int);
        spin_log_kernel<<<blocks, threads, smem>>>(own_ns, dlog, TS_MAX_GAPS, dn);
        CKL();
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(&n, dn, sizeof n, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(log, dlog, 2 * sizeof(unsigned long long) * n, cudaMemcpyDeviceToHost));
    }
    kb_write_all(res_fd, &n, sizeof n);
    kb_write_all(res_fd, log, 2 * sizeof(unsigned long long) * n);
    _exit(0);
}

/* Runs N children at once; fills runs and gaps (µs, pooled over children). -1 on failure. */
static int measure(int N, int full, kb_ts_result_t *r)
{
    int ready[2], go[2], res[KB_TS_MAX_PROCS][2];
    pid_t pid[KB_TS_MAX_PROCS];
    if (pipe(ready) || pipe(go))
        return -1;
    for (int i = 0; i < N; i++) {
        if (pipe(res[i]))
            return -1;
        pid[i] = fork();
        if (pid[i] == 0)
            child(full, TS_OWN_NS, ready[1], go[0], res[i][1]);
        close(res[i][1]);
    }
    char c, g[KB_TS_MAX_PROCS];
    for (int i = 0; i < N; i++)
        kb_read_all(ready[0], &c, 1);
    memset(g, 'g', sizeof g);
    kb_write_all(go[1], g, N);
    static unsigned long long log[2 * TS_MAX_GAPS];
    int fail = 0;
    r->procs = N;
    r->full = full;
    r->n_runs = r->n_gaps = 0;
    for (int i = 0; i < N; i++) {
        int n = 0;
        if (kb_read_all(res[i][0], &n, sizeof n) || n < 0 || n > TS_MAX_GAPS ||
            kb_read_all(res[i][0], log, 2 * sizeof(unsigned long long) * n))
            fail = 1;
        for (int j = 0; !fail && j < n; j++) {
            if (r->n_gaps < KB_TS_MAX_SAMPLES)
                r->gaps_us[r->n_gaps++] = (log[2 * j + 1] - log[2 * j]) * 1e-3;
            if (j + 1 < n && r->n_runs < KB_TS_MAX_SAMPLES)
                r->runs_us[r->n_runs++] = (log[2 * j + 2] - log[2 * j + 1]) * 1e-3;
        }
        close(res[i][0]);
        int st;
        waitpid(pid[i], &st, 0);
        fail |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    close(ready[0]); close(ready[1]); close(go[0]); close(go[1]);
    return fail || r->n_runs < 3 ? -1 : 0;
}

int kb_timeslice_measure(kb_ts_result_t *out, int max_n)
{
    int n = 0;
    for (int full = 0; full < 2; full++)
        for (int N = 2; N <= KB_TS_MAX_PROCS && n < max_n; N++)
            if (measure(N, full, &out[n]) == 0)
                n++;
    return n;
}

void kb_timeslice_rows(kb_csv_t *csv, kb_ts_result_t *res, int n)
{
    for (int i = 0; i < n; i++) {
        kb_ts_result_t *r = &res[i];
        char policy[32];
        snprintf(policy, sizeof policy, "procs:%d", r->procs);
        const char *variant[2] = {r->full ? "run_full" : "run", r->full ? "gap_full" : "gap"};
        double *t[2] = {r->runs_us, r->gaps_us};
        int cnt[2] = {r->n_runs, r->n_gaps};
        for (int v = 0; v < 2; v++) {
            kb_row_t row = kb_row("timeslice", variant[v]);
            row.procs = r->procs;
            row.policy = policy;
            row.pieces = cnt[v];
            row.st = kb_stats(t[v], cnt[v]);
            kb_csv_row(csv, &row);
        }
    }
}

/* ---- --only idle: does a context keep the GPU while its host turns around? ----------------- */

#define TS_IDLE_KERNELS 150
#define TS_IDLE_WORK_NS 200000ull    /* each host-driven kernel: 200 us of the whole GPU */
#define TS_IDLE_OTHER_NS 1000000000ull   /* the other context spins 1 s of its own time */

/* Every thread spins own_ns of running time (gaps past TS_GAP_NS are not its own); thread 0 of
 * block 0 writes the first and last globaltimer readings to se[0], se[1]. */
__global__ void work_log_kernel(unsigned long long own_ns, unsigned long long *se)
{
    extern __shared__ unsigned int pad[];
    unsigned long long t0 = gtimer(), last = t0, own = 0;
    while (own < own_ns) {
        unsigned long long t = gtimer(), d = t - last;
        if (d <= TS_GAP_NS)
            own += d;
        last = t;
        pad[threadIdx.x] += (unsigned int)d;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        se[0] = t0;
        se[1] = last + (pad[0] == 0xffffffffu);   /* pad read: kept live */
    }
}

/* Child: TS_IDLE_KERNELS kernels of the whole GPU, each launched after the host saw the one before
 * end (cudaEventSynchronize), between two events as the concurrency suite times a step: their
 * [start, end] and the events' elapsed times (us) sent back. Never returns. */
static void idle_child(int ready_fd, int go_fd, int res_fd)
{
    unsigned long long *dse;
    static unsigned long long se[2 * TS_IDLE_KERNELS];
    static double ev_us[TS_IDLE_KERNELS];
    int n = 0;
    cudaStream_t s;
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMalloc(&dse, sizeof se));
    work_log_kernel<<<1, 1, sizeof(unsigned int), s>>>(1000, dse);   /* load the module */
    CK(cudaStreamSynchronize(s));
    char c = 'r';
    kb_write_all(ready_fd, &c, 1);
    if (kb_read_all(go_fd, &c, 1) == 0) {
        for (n = 0; n < TS_IDLE_KERNELS; n++) {
            CK(cudaEventRecord(a, s));
            work_log_kernel<<<4 * kb_sm_count(), 256, 48 * 1024, s>>>(TS_IDLE_WORK_NS, dse + 2 * n);
            CKL();
            CK(cudaEventRecord(b, s));
            CK(cudaEventSynchronize(b));
            float ms;
            CK(cudaEventElapsedTime(&ms, a, b));
            ev_us[n] = ms * 1e3;
        }
        CK(cudaMemcpy(se, dse, sizeof se, cudaMemcpyDeviceToHost));
    }
    kb_write_all(res_fd, &n, sizeof n);
    kb_write_all(res_fd, se, 2 * sizeof(unsigned long long) * n);
    kb_write_all(res_fd, ev_us, sizeof(double) * n);
    _exit(0);
}

/* The host-driven context alone (with_other 0) or beside a spinning one: its gaps between kernels
 * (end to next start, us) and its kernels' spans into r. -1 on failure. */
static int measure_idle(int with_other, kb_ts_idle_t *r)
{
    int ready[2], go[2], res[2][2];
    pid_t pid[2];
    int nproc = 1 + with_other;
    if (pipe(ready) || pipe(go))
        return -1;
    for (int i = 0; i < nproc; i++) {
        if (pipe(res[i]))
            return -1;
        pid[i] = fork();
        if (pid[i] == 0) {
            if (i == 0)
                idle_child(ready[1], go[0], res[i][1]);
            child(1, TS_IDLE_OTHER_NS, ready[1], go[0], res[i][1]);   /* the other: the whole GPU */
        }
        close(res[i][1]);
    }
    char c, g[2] = {'g', 'g'};
    for (int i = 0; i < nproc; i++)
        kb_read_all(ready[0], &c, 1);
    kb_write_all(go[1], g, nproc);
    static unsigned long long log[2 * TS_MAX_GAPS];
    static double ev[TS_IDLE_KERNELS];
    int fail = 0, n = 0;
    r->other = with_other;
    r->n = 0;
    if (kb_read_all(res[0][0], &n, sizeof n) || n < 2 || n > TS_IDLE_KERNELS ||
        kb_read_all(res[0][0], log, 2 * sizeof(unsigned long long) * n) || kb_read_all(res[0][0], ev, sizeof(double) * n))
        fail = 1;
    for (int j = 0; !fail && j + 1 < n; j++) {   /* kernel j + 1 after the gap before it */
        r->gap_us[r->n] = (log[2 * j + 2] - log[2 * j + 1]) * 1e-3;
        r->span_us[r->n] = (log[2 * j + 3] - log[2 * j + 2]) * 1e-3;
        r->event_us[r->n++] = ev[j + 1];
    }
    if (with_other) {
        int m = 0;
        static unsigned long long olog[2 * TS_MAX_GAPS];
        if (kb_read_all(res[1][0], &m, sizeof m) || m < 0 || m > TS_MAX_GAPS ||
            kb_read_all(res[1][0], olog, 2 * sizeof(unsigned long long) * m))
            fail = 1;
        /* only the host-driven kernels that ran while the other context still spun count */
        unsigned long long other_last = m > 0 ? olog[2 * m - 1] : 0;
        int keep = 0;
        for (int j = 0; !fail && j < r->n; j++)
            if (log[2 * j + 2] < other_last) {
                r->gap_us[keep] = r->gap_us[j];
                r->span_us[keep] = r->span_us[j];
                r->event_us[keep++] = r->event_us[j];
            }
        r->n = keep;
    }
    for (int i = 0; i < nproc; i++) {
        close(res[i][0]);
        int st;
        waitpid(pid[i], &st, 0);
        fail |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    close(ready[0]); close(ready[1]); close(go[0]); close(go[1]);
    return fail || r->n < 3 ? -1 : 0;
}

int kb_timeslice_idle(kb_ts_idle_t out[2])
{
    int n = 0;
    for (int w = 0; w < 2; w++)
        if (measure_idle(w, &out[n]) == 0)
            n++;
    return n;
}

void kb_timeslice_idle_rows(kb_csv_t *csv, kb_ts_idle_t *res, int n)
{
    for (int i = 0; i < n; i++) {
        kb_ts_idle_t *r = &res[i];
        const char *variant[3] = {r->other ? "idle_gap" : "idle_gap_alone", r->other ? "idle_span" : "idle_span_alone",
                                  r->other ? "idle_event" : "idle_event_alone"};
        double *t[3] = {r->gap_us, r->span_us, r->event_us};
        for (int v = 0; v < 3; v++) {
            kb_row_t row = kb_row("timeslice", variant[v]);
            row.procs = 1 + r->other;
            row.policy = r->other ? "procs:2" : "procs:1";
            row.pieces = r->n;
            row.st = kb_stats(t[v], r->n);
            kb_csv_row(csv, &row);
        }
    }
}
