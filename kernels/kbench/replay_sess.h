/* replay_sess.h: one session of a replay workload (docs/replay.md) on the GPU: its pinned region,
 * its ops' device buffers, streams and events, how its ops are issued, and their checks.
 *
 * A session belongs to one host thread (streams and procs modes) or to the one thread that runs
 * them all (batched); its calls are not thread-safe. Failures of setup and checks are returned with
 * a message on stderr; a failed CUDA call in an op is fatal (CK), as everywhere in kbench. */
#ifndef KB_REPLAY_SESS_H
#define KB_REPLAY_SESS_H

#include <stdint.h>
#include "replay_fmt.h"

typedef struct rp_sess rp_sess_t;

/* Host monotonic clock, seconds. */
double rp_now_s(void);
/* Busy-waits us microseconds on the host's monotonic clock. */
void rp_spin_host_us(uint64_t us);
/* Idles us microseconds (sleeps most of it, spins the last 100 us for precision). */
void rp_idle_us(uint64_t us);

/* Session `id` of w, set up: its region pinned (cudaHostAlloc mapped|portable, left as allocated),
 * its ops' device buffers (filled for the checks), host and device piece offsets, streams (those
 * its ops name, non-blocking) and the events its `after` edges wait on. w must outlive it. Returns
 * NULL, with the reason on stderr, when memory runs short or an op cannot run on this device. */
rp_sess_t *rp_sess_new(const rf_workload_t *w, uint32_t id);
/* Releases everything rp_sess_new made (NULL: nothing). */
void rp_sess_free(rp_sess_t *S);

/* Number of ops of the session's step. */
uint32_t rp_sess_n_ops(const rp_sess_t *S);
/* Issues op i of the step (its `after` waits first, its event after it); a sync op synchronises the
 * streams used since the last sync, a host op spins on the host. Ops must be issued in index order. */
void rp_sess_issue(rp_sess_t *S, uint32_t i);
/* Waits for every stream the session issued on since its last sync. */
void rp_sess_sync(rp_sess_t *S);
/* One whole step (every op, then the final sync); returns its time in microseconds, host clock from
 * just before the first op to the return of the final sync. */
double rp_sess_step(rp_sess_t *S);

/* Runs each op alone once (outside any step) and checks what it did: transfers' first and last
 * pieces byte for byte against their source (host bytes for copies to the device and gathers,
 * device bytes for d2h), hbm's sum and compute's per-block results against the host's, a gemm's
 * first and last elements of C against k (its inputs are all 1.0; cuBLAS's status is checked on
 * every call). Returns 0,
 * or -1 with the first failure on stderr. Call after the warm-up, with nothing in flight. */
int rp_sess_check(rp_sess_t *S);

#endif
