/* replay_run.cu: one replay workload in its serving mode (see replay_run.h).
 *
 * The sessions meet in an rp_shared_t: each sets up, warms up and checks itself, then counts itself
 * ready and waits for `go`, which the coordinator (the calling thread; in procs mode the CUDA-free
 * parent of the session processes) sets once all are ready. Any session that fails sets `failed`,
 * which every waiting or stepping session polls, so no one waits for a session that is gone; in
 * procs mode the coordinator also sets it when a session process dies. After its window a session
 * counts itself closed and steps on, unmeasured, until all are (or one failed).
 */
#include <errno.h>
#include <signal.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include "kb.h"
#include "replay_run.h"
#include "replay_sess.h"

static int ld(int *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static void set1(int *p) { __atomic_store_n(p, 1, __ATOMIC_SEQ_CST); }
static void inc(int *p) { __atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST); }

static void nap_us(long us)
{
    struct timespec t = {0, us * 1000};
    nanosleep(&t, NULL);
}

void rp_die_with_parent(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)      /* it died before the line above */
        _exit(3);
}

rp_shared_t *rp_shared_new(void)
{
    void *p = mmap(NULL, sizeof(rp_shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("kbench replay: mmap of the shared results");
        return NULL;
    }
    return (rp_shared_t *)p;
}

void rp_shared_free(rp_shared_t *sh)
{
    if (sh)
        munmap(sh, sizeof *sh);
}

/* One step of whatever runs (a session, or every session batched); its time in microseconds. */
typedef double (*step_fn)(void *ctx);

/* The measured window (window_ms and at least min_steps steps, idle_us after each) into r, then
 * unmeasured steps until n windows have closed. Stops early when a session failed. */
static void window(step_fn step, void *ctx, uint64_t idle_us, const rf_workload_t *w, rp_shared_t *sh,
                   rp_result_t *r, int n)
{
    double t0 = rp_now_s(), win_s = w->window_ms * 1e-3;
    while (!ld(&sh->failed) && (r->steps < (int)w->min_steps || rp_now_s() - t0 < win_s)) {
        if (r->steps == RP_MAX_STEPS) {
            r->capped = 1;
            break;
        }
        r->lat_us[r->steps++] = step(ctx);
        rp_idle_us(idle_us);
    }
    r->wall_s = rp_now_s() - t0;
    inc(&sh->closed);
    while (ld(&sh->closed) < n && !ld(&sh->failed)) {
        step(ctx);
        rp_idle_us(idle_us);
    }
}

static uint64_t warm_steps(const rf_workload_t *w) { return w->warmup_steps ? w->warmup_steps : 1; }

static double sess_step(void *S) { return rp_sess_step((rp_sess_t *)S); }

/* A session of procs or streams mode, start to end. Returns 0, or -1 when it failed itself. */
static int session_main(const rf_workload_t *w, uint32_t id, rp_shared_t *sh)
{
    uint64_t idle = w->sessions[id].idle_us;
    rp_sess_t *S = rp_sess_new(w, id);
    for (uint64_t k = 0; S && k < warm_steps(w); k++) {
        rp_sess_step(S);
        rp_idle_us(idle);
    }
    if (!S || rp_sess_check(S) != 0) {
        set1(&sh->failed);
        rp_sess_free(S);
        return -1;
    }
    inc(&sh->ready);
    while (!ld(&sh->go) && !ld(&sh->failed))
        nap_us(50);
    if (!ld(&sh->failed))
        window(sess_step, S, idle, w, sh, &sh->res[id], (int)w->n_sessions);
    rp_sess_free(S);
    return 0;
}

/* Sets go once all n sessions are ready (nothing once one failed). */
static void maybe_go(rp_shared_t *sh, int n)
{
    if (!ld(&sh->go) && !ld(&sh->failed) && ld(&sh->ready) == n)
        set1(&sh->go);
}

static void report_exit(const rf_workload_t *w, int id, int status)
{
    if (WIFSIGNALED(status))
        fprintf(stderr, "kbench replay: %s session %d: process killed by signal %d (%s)\n", w->name, id,
                WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        fprintf(stderr, "kbench replay: %s session %d: process exited with status %d\n", w->name, id,
                WEXITSTATUS(status));
}

/* procs: one forked process per session; this process stays CUDA-free and reaps them, marking the
 * workload failed as soon as one dies. */
static int run_procs(const rf_workload_t *w, rp_shared_t *sh)
{
    int n = (int)w->n_sessions, alive = 0;
    pid_t pid[RF_MAX_SESSIONS];
    pid_t self = getpid();
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pid[i] = fork();
        if (pid[i] < 0) {
            perror("kbench replay: fork");
            set1(&sh->failed);
            break;
        }
        if (pid[i] == 0) {
            rp_die_with_parent(self);
            int rc = session_main(w, (uint32_t)i, sh);
            fflush(NULL);
            _exit(rc ? 1 : 0);
        }
        alive++;
    }
    while (alive > 0) {
        maybe_go(sh, n);
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            alive--;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                set1(&sh->failed);
                for (int i = 0; i < n; i++)
                    if (pid[i] == p)
                        report_exit(w, i, status);
            }
        } else if (p == 0) {
            nap_us(1000);
        } else if (errno != EINTR) {
            perror("kbench replay: waitpid");
            set1(&sh->failed);
            break;
        }
    }
    return ld(&sh->failed) ? -1 : 0;
}

typedef struct {
    const rf_workload_t *w;
    uint32_t id;
    rp_shared_t *sh;
} thr_arg_t;

static void *thr_main(void *p)
{
    thr_arg_t *a = (thr_arg_t *)p;
    session_main(a->w, a->id, a->sh);
    return NULL;
}

/* streams: one host thread per session in this process. */
static int run_streams(const rf_workload_t *w, rp_shared_t *sh)
{
    int n = (int)w->n_sessions, started = 0;
    pthread_t th[RF_MAX_SESSIONS];
    thr_arg_t a[RF_MAX_SESSIONS];
    for (int i = 0; i < n; i++) {
        a[i] = (thr_arg_t){w, (uint32_t)i, sh};
        if (pthread_create(&th[i], NULL, thr_main, &a[i]) != 0) {
            fprintf(stderr, "kbench replay: %s: cannot start session %d's thread\n", w->name, i);
            set1(&sh->failed);
            break;
        }
        started++;
    }
    while (!ld(&sh->go) && !ld(&sh->failed)) {
        maybe_go(sh, n);
        nap_us(1000);
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return ld(&sh->failed) ? -1 : 0;
}

typedef struct {
    rp_sess_t *S[RF_MAX_SESSIONS];
    uint32_t n, max_ops;
} batch_t;

/* batched: op i of every session that has one (session 0 first), for i = 0, 1, ...; then every
 * session's streams waited for. */
static double batch_step(void *p)
{
    batch_t *b = (batch_t *)p;
    double t0 = rp_now_s();
    for (uint32_t i = 0; i < b->max_ops; i++)
        for (uint32_t s = 0; s < b->n; s++)
            if (i < rp_sess_n_ops(b->S[s]))
                rp_sess_issue(b->S[s], i);
    for (uint32_t s = 0; s < b->n; s++)
        rp_sess_sync(b->S[s]);
    return (rp_now_s() - t0) * 1e6;
}

/* batched: one host thread runs every session; its idle time is the longest session's idle_us;
 * every session's row gets the batched steps' times. */
static int run_batched(const rf_workload_t *w, rp_shared_t *sh)
{
    batch_t b;
    memset(&b, 0, sizeof b);
    b.n = w->n_sessions;
    uint64_t idle = 0;
    int ok = 1;
    for (uint32_t s = 0; s < b.n && ok; s++) {
        ok = (b.S[s] = rp_sess_new(w, s)) != NULL;
        if (w->sessions[s].n_ops > b.max_ops)
            b.max_ops = w->sessions[s].n_ops;
        if (w->sessions[s].idle_us > idle)
            idle = w->sessions[s].idle_us;
    }
    for (uint64_t k = 0; ok && k < warm_steps(w); k++) {
        batch_step(&b);
        rp_idle_us(idle);
    }
    for (uint32_t s = 0; s < b.n && ok; s++)
        ok = rp_sess_check(b.S[s]) == 0;
    if (ok) {
        set1(&sh->go);
        window(batch_step, &b, idle, w, sh, &sh->res[0], 1);
        for (uint32_t s = 1; s < b.n; s++) {
            rp_result_t *r = &sh->res[s];
            r->steps = sh->res[0].steps;
            r->capped = sh->res[0].capped;
            r->wall_s = sh->res[0].wall_s;
            memcpy(r->lat_us, sh->res[0].lat_us, r->steps * sizeof(double));
        }
    } else {
        set1(&sh->failed);
    }
    for (uint32_t s = 0; s < b.n; s++)
        rp_sess_free(b.S[s]);
    return ok ? 0 : -1;
}

int rp_run(const rf_workload_t *w, rp_shared_t *sh)
{
    sh->ready = sh->go = sh->failed = sh->closed = 0;
    for (int i = 0; i < RF_MAX_SESSIONS; i++) {
        sh->res[i].steps = sh->res[i].capped = 0;
        sh->res[i].wall_s = 0;
    }
    switch (w->mode) {
    case RF_MODE_PROCS:
        return run_procs(w, sh);
    case RF_MODE_STREAMS:
        return run_streams(w, sh);
    default:
        return run_batched(w, sh);
    }
}
