/* replay_pred — odsim's prediction of a replay workload (docs/replay.md): its sessions on one GPU
 * of a box, under a calibration profile, through the engine, measured as kbench replay measures.
 *
 * Sessions map to the engine's serving modes: procs → separate processes (EXEC_PROCESSES: a context
 * and a launch thread each, time-sliced); streams → streams of one process with a launch thread per
 * session (EXEC_STREAMS, launch_per_session: the context's hardware queues shared); batched → one
 * thread issuing every session's ops round robin, each session's streams its own, one step for all
 * (EXEC_LOCKSTEP, batch_streams_apart). Every session's plan is models/replay.h's. The serving
 * options the file does not fix are the scenario defaults (`odsim params`: hw_queues, gathers_exclusive)
 * and the calibration's jitter is on, its seed the workload's.
 *
 * Steps, as kbench replay runs them: each session runs warmup_steps steps (at least one), then all
 * start together (the latest session's warm-up end plus its idle time: found by simulating the
 * warm-ups first, which the full run repeats exactly), each measures the steps it begins within
 * window_ms of that start (at least min_steps), and keeps stepping until every window has closed. A
 * step's time runs from its plan's beginning (its first launch) to its last op's end; idle_us passes
 * after each step (in batched mode the batch waits for the longest). Steps per second: measured steps
 * over the window's wall time, from the start to the end of the idle time after the last one. */
#ifndef ODSIM_CLI_REPLAY_PRED_H
#define ODSIM_CLI_REPLAY_PRED_H

#include <stdbool.h>
#include <stdint.h>
#include "common/err.h"
#include "kernels/replay_fmt.h"

typedef struct rpred_opts {
    const char *calib_path;   /* profile (NULL: the study default, models/calib/h200.yaml) */
    const char *box;          /* box preset (NULL: h200-1, the measured machine) */
    bool no_jitter;           /* the calibration's jitter off (closed forms in tests) */
    const char *clamp;        /* parameters whose uses are clamped into their range (calib_clamp); NULL: none */
} rpred_opts_t;

/* Step times of the measured steps (seconds). */
typedef struct rpred_stat {
    uint64_t steps;
    double p10_s, p50_s, p90_s, p99_s, mean_s;
    double per_s;             /* steps per second over the window (pooled: summed) */
} rpred_stat_t;

typedef struct rpred {
    char profile[128];        /* the calibration profile's name */
    char box[64], gpu[64];
    uint64_t calib_hash;
    uint32_t n_sessions;
    rpred_stat_t session[RF_MAX_SESSIONS];
    rpred_stat_t pooled;      /* every session's steps together */
    double start_s, end_s;    /* the common start of the windows; the last measured step's end */
    char *flags;              /* calibration parameters assumed or used outside their range, one per
                               * line ("" none); owned */
    char clamps[1024];        /* of those outside their range, the ones whose cost term clamps
                               * (calib_clamp_list), comma-separated */
} rpred_t;

/* Reads and parses the workload file at path into *w (about 1 MB: the caller's, e.g. on the heap)
 * and the FNV-1a 64 of its bytes into *fnv (the CSV's workload_fnv). Errors: ERR_IO, ERR_PARSE
 * ("PATH:LINE: what", docs/replay.md), ERR_NOMEM. */
int rpred_load(const char *path, rf_workload_t *w, uint64_t *fnv, err_t *e);

/* Predicts w into *out (rpred_free it). Errors: those of the catalogs, the profile and the engine;
 * ERR_CAPACITY (the sessions' regions or device buffers do not fit the box), ERR_INVAL (a step that
 * takes no time and no idle between: nothing would advance), ERR_NOMEM. */
int rpred_run(const rf_workload_t *w, const rpred_opts_t *o, rpred_t *out, err_t *e);
void rpred_free(rpred_t *r);

#endif
