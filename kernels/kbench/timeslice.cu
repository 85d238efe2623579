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
