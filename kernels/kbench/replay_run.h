/* replay_run.h: runs one replay workload (docs/replay.md) in its serving mode with aligned windows,
 * its measurements left in memory shared with the process that forked the runner. */
#ifndef KB_REPLAY_RUN_H
#define KB_REPLAY_RUN_H

#include <sys/types.h>
#include "replay_fmt.h"

/* Measured steps a session keeps at most: its window closes early when it reaches them. */
#define RP_MAX_STEPS 1000000

typedef struct {
    int steps;                    /* measured steps */
    int capped;                   /* the window closed at RP_MAX_STEPS */
    double wall_s;                /* the measured window's length (its steps and idle times) */
    double lat_us[RP_MAX_STEPS];  /* each measured step's time */
} rp_result_t;

/* What the sessions of one workload share, across processes: flags and counters (atomics), and
 * every session's measurements. */
typedef struct {
    int ready;                    /* sessions set up, warmed up and checked */
    int go;                       /* every session is ready: start the windows */
    int failed;                   /* a session failed: everyone stops */
    int closed;                   /* sessions whose measured window has closed */
    rp_result_t res[RF_MAX_SESSIONS];
} rp_shared_t;

/* A zeroed rp_shared_t in anonymous memory shared with the children forked after this call, or NULL
 * (with a message on stderr). Free with rp_shared_free. */
rp_shared_t *rp_shared_new(void);
void rp_shared_free(rp_shared_t *sh);

/* In a child just forked by `parent`: dies (SIGKILL) when the parent does, so that no session or
 * workload outlives the process waiting for it. */
void rp_die_with_parent(pid_t parent);

/* Runs w in the calling process, which must not have started CUDA (procs mode forks one process per
 * session; streams and batched start CUDA here): every session set up, warmed up (warmup_steps,
 * at least one), checked (rp_sess_check), then all measured together from a common start, each for
 * window_ms and at least min_steps steps, stepping on unmeasured until every window has closed.
 * Results in sh->res[0..n_sessions). Returns 0, or -1 when a session failed (why on stderr). */
int rp_run(const rf_workload_t *w, rp_shared_t *sh);

#endif
