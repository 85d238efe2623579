/* exec — runs sessions' plans on a box: how sessions reach the GPU, their turns, admission, stats.
 *
 * Sessions replay turns (think time or a recorded arrival, prefill tokens appended in chunks, then
 * decode steps). For each step the session's plan provider builds a DAG (sim/plan.h) that the executor
 * launches and runs:
 *   - launches cost host CPU time on the context's launch thread, a serial server that issues a
 *     plan's launches back to back until one must wait, then the next plan's in FIFO order (one per process;
 *     with CUDA graphs one launch per graph segment instead of one per op; a host_sync op starts a
 *     new segment and its launch waits for its predecessors);
 *   - an op starts when launched, its predecessors are done and the previous op of its stream is done;
 *     it then runs as one fluid flow over its resources (sim/sim.h);
 *   - separate processes (EXEC_PROCESSES) are separate CUDA contexts without MPS: their kernels
 *     are time-sliced (copy engines have run lists of their own: copies are not), contexts' kernels
 *     never overlap; the owner's kernels start while no other context waits or its slice
 *     (timeslice_ps) lasts; then, once its kernels in flight are done (ops are not preempted; what a
 *     slice runs past its length comes off the context's next one, as the GPU's preemption keeps
 *     each slice to its length), the longest-waiting context gets the GPU after ctx_switch_ps, or
 *     after ctx_switch_idle_ps when the owner idled within its slice;
 *   - streams of one process (EXEC_STREAMS) and MPS (EXEC_MPS) overlap as resources allow; streams
 *     share one launch thread per GPU (a serving process per GPU) unless each session has its own
 *     (launch_per_session: a thread per session in one process), MPS clients have one each;
 *   - with gathers_exclusive, a GPU op whose SMs read host memory (an SM gather) and the other
 *     kernels take the GPU in turns, whatever their streams or contexts: the ops of one kind start
 *     only when none of the other kind runs, in the order they became ready (kernels among
 *     themselves and gathers among themselves overlap as resources allow);
 *   - a context has a few hardware work queues (exec_config_t.hw_queues, CUDA's default 8); streams
 *     beyond them share one, and a queue starts its ops in the order they were launched: an op
 *     waits behind another stream's op that waits for its own predecessors (false serialisation);
 *   - lockstep and continuous batching (EXEC_LOCKSTEP, EXEC_CONTINUOUS) run one iteration at a time
 *     per GPU: the plans of the batched sessions are merged (equal merge keys execute once, their cost
 *     evaluated for the batch size) and issued round robin (op i of every session, then op i+1)
 *     from the GPU's one launch thread. Lockstep waits for every live session on the GPU; continuous
 *     takes the sessions ready when the iteration starts.
 * Memory: each session's footprint (plan_provider_ops_t.footprint) is taken from the GPU's HBM pool
 * and the host pool — in full at admission (EXEC_ADMIT_RESERVE), or as the context grows with the
 * session waiting (preempted) or evicted when a pool is full.
 *
 * The executor owns the sessions' providers once added. It never looks inside an op beyond its
 * executor, stream, cost and uses. */
#ifndef ODSIM_SIM_EXEC_H
#define ODSIM_SIM_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"
#include "sim/hist.h"
#include "sim/plan.h"
#include "sim/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { EXEC_MAX_HW_QUEUES = 32 }; /* CUDA's upper bound on CUDA_DEVICE_MAX_CONNECTIONS */

typedef enum { EXEC_STREAMS, EXEC_PROCESSES, EXEC_MPS, EXEC_LOCKSTEP, EXEC_CONTINUOUS } exec_mode_t;
typedef enum { EXEC_ADMIT_RESERVE, EXEC_ADMIT_GROW_PREEMPT, EXEC_ADMIT_GROW_EVICT } exec_admit_t;

typedef struct exec_config {
    exec_mode_t mode;
    bool cuda_graphs;            /* one launch per graph segment instead of one per op */
    bool coarse;                 /* run each plan in its coarse form (plan_coarsen): far fewer events,
                                  * order within a step lost; not with batching */
    double coarse_reuse;         /* coarse: reuse a session's last coarse plan while its context is
                                  * within this fraction of the one it was built at (0: rebuild) */
    exec_admit_t admission;
    int n_gpus;                  /* ≥ 1 */
    uint32_t max_batch;          /* batching modes: most sessions per iteration; 0 = no limit */
    uint32_t prefill_chunk;      /* tokens per prefill chunk, ≥ 1 */
    sim_ps_t graph_launch_ps;    /* host time to launch one CUDA graph segment */
    uint32_t hw_queues;          /* hardware work queues per CUDA context (CUDA_DEVICE_MAX_CONNECTIONS,
                                  * ≤ EXEC_MAX_HW_QUEUES); 0: one per stream. Streams take them round
                                  * robin as first used, so beyond this many streams share a queue,
                                  * which starts its ops in issue order. Not with batching. */
    bool one_stream;             /* each session's ops all on one stream (no overlap within a session) */
    bool launch_per_session;     /* streams: each session launches its plans from a host thread of its
                                  * own (threads of one process: the context's hardware queues stay
                                  * shared); else one launch thread per GPU serves every session. Not
                                  * with batching (separate processes and MPS clients have their own) */
    bool batch_streams_apart;    /* batching: each batched session's plan streams stay its own in the
                                  * merged iteration (a loop issuing every session's ops, a stream set
                                  * per session); else a plan stream number is one stream of the batch */
    bool gathers_exclusive;      /* GPU ops whose SMs read host memory (SM gathers, zero-copy kernels)
                                  * and the other kernels never run at once on a GPU: an op of one kind
                                  * waits until none of the other runs, in the order they became ready */
    sim_ps_t timeslice_ps;       /* processes: a context keeps the GPU this long while others wait
                                  * (0: hand it over after every op) */
    sim_ps_t ctx_switch_ps;      /* processes: GPU idle time when it passes to another context
                                  * that waited while the owner's slice ran out (a preemption) */
    sim_ps_t ctx_switch_idle_ps; /* processes: the same when the owner had no kernel in flight
                                  * within its slice (the GPU idled and passes) */
    sim_ps_t copy_handoff_ps;    /* a kernel waiting on a copy-engine op starts no sooner than this
                                  * after the copy ends (its completion reaching the SMs), on average */
    sim_ps_t copy_handoff_spread_ps; /* > 0: each hand-off a uniform draw over copy_handoff_ps ± half
                                  * this (the jitter's stream; a completion is seen at a periodic
                                  * check whose phase varies); 0: always copy_handoff_ps */
    double jitter_abs_s, jitter_rel; /* each op's time varies: an exponential tail with its median at
                                  * the op's time alone t and its p99 jitter_abs_s + jitter_rel·t above
                                  * it (both 0: none) */
    double jitter_copy_abs_s, jitter_copy_rel; /* the same for copy-engine ops moving host bytes */
    double jitter_gather_abs_s, jitter_gather_rel; /* the same for GPU ops moving host bytes (their SMs
                                  * read host memory: gathers, zero-copy kernels), whose times vary most */
    uint64_t jitter_seed;        /* the jitter's random stream */
    bool latency_from_queue;     /* a plan's latency runs from when its first op reaches the head of
                                  * its hardware queue (what an event recorded in a CUDA stream before
                                  * it measures), not from when the session begins the plan */
    /* Pools by GPU (HBM) and the host pool; -1 for none (memory not tracked). */
    const sim_pool_t *hbm_pool;  /* n_gpus entries, or NULL */
    sim_pool_t host_pool;
    bool host_spill;             /* host bytes beyond host_pool's capacity go to host_spill_pool (a
                                  * memory tier behind the CPU); they are released from it first */
    sim_pool_t host_spill_pool;
    uint32_t timeline_plans;     /* record the ops of the first N plans (all sessions) */
    double slo_ttft_s;           /* a turn meets the SLO when its TTFT is at most this (0: any) */
    double slo_turn_tps;         /*   and it decodes at least this many tokens/s (0: any) */
    /* Called after every plan of every session (NULL: none): context before the plan, its latency. */
    void (*on_plan)(void *arg, uint64_t session, plan_phase_t phase, uint64_t context_tokens, double latency_s);
    void *on_plan_arg;
    uint32_t n_groups;           /* sessions' groups whose statistics are also kept apart (0: none) */
} exec_config_t;

typedef struct exec_turn {
    bool restart;            /* a new session of the same user begins: the context restarts at
                              * context_tokens and memory shrinks to its footprint */
    uint64_t context_tokens; /* with restart: tokens already in the new context (a reused prefix) */
    double think_s;          /* closed loop: time after the previous turn's last token; ≥ 0 */
    double arrival_s;        /* open loop: absolute arrival time; < 0 when the source has none */
    uint32_t prefill_tokens; /* tokens appended (user message, tool output) */
    uint32_t decode_tokens;  /* tokens generated, ≥ 1 */
    double step_idle_s;      /* host idle time after each of the turn's plans but its last, before the
                              * next (a serving loop that pauses between steps); ≥ 0 */
} exec_turn_t;

typedef struct exec_session_spec {
    uint64_t id;
    int gpu;                 /* 0 .. n_gpus-1 */
    double arrival_s;        /* session start (its first turn's earliest time) */
    uint64_t context_tokens; /* tokens already in context at arrival (e.g. a shared prefix) */
    uint64_t final_tokens;   /* context at the end of its last turn (for reservation) */
    bool open_loop;          /* turns at their arrival_s (else after think_s) */
    const exec_turn_t *turns;
    size_t n_turns;
    plan_provider_t provider; /* ownership passes to the executor on success */
    uint32_t group;          /* its group, < exec_config_t.n_groups (0 when there are none) */
} exec_session_spec_t;

/* Aggregated results. Histograms are in seconds; owned by the executor. */
typedef struct exec_stats {
    hist_t *step_s;          /* decode step latency */
    hist_t *ttft_s;          /* time to first token per turn: turn ready → the prefill that samples it
                              * done (or, for a turn with no prefill, its first decode step) */
    hist_t *prefill_chunk_s; /* prefill chunk latency */
    hist_t *admit_wait_s;    /* arrival → admission */
    hist_t *admit_waiting_s; /* arrival → now of sessions not yet admitted (their waits so far: lower
                              * bounds), rebuilt by exec_stats */
    hist_t *session_tps;     /* per session: decode tokens / time in decode steps (tokens/s) */
    uint64_t decode_tokens, prefill_tokens, plans, turns_done, sessions_done;
    uint64_t turns_slo_ok;   /* turns meeting slo_ttft_s and slo_turn_tps */
    uint64_t turns_all;      /* turns completed since the run began (the measured window does not */
    double turn_all_s;       /*   reset them) and their summed durations: turn ready (a session's
                              *   arrival for its first) to its last token */
    uint64_t open_slo_ok, open_slo_missed; /* turns still running: already decided either way */
    uint64_t preemptions, evictions;
    uint64_t sessions_waiting; /* waiting for memory now (admission or growth) */
    double first_token_s, last_token_s; /* span over which tokens were produced */
    double *lost_ps;         /* where time went, summed over all plans' ops: one entry per resource,
                              * then EXEC_LOST_CAP, EXEC_LOST_LAUNCH, EXEC_LOST_TIMESLICE,
                              * EXEC_LOST_TURNS (n_lost) */
    size_t n_lost;
    double standalone_ps_sum, actual_ps_sum; /* Σ over plans of idle-machine and actual latency */
    double launch_busy_ps;   /* Σ launch-thread busy time over all threads */
    uint32_t launch_threads;
} exec_stats_t;

enum { EXEC_LOST_CAP = 0, EXEC_LOST_LAUNCH = 1, EXEC_LOST_TIMESLICE = 2, EXEC_LOST_TURNS = 3, EXEC_LOST_EXTRA = 4 };

/* One op's execution, for timelines (first `timeline_plans` plans). */
typedef struct exec_trace_op {
    uint64_t session;        /* the first session of a merged op */
    uint32_t batch;          /* sessions served */
    uint64_t plan;           /* index of the plan within the session */
    uint16_t kind, layer;
    uint8_t exec, stream;
    int gpu;
    sim_ps_t t_launch_ps, t_start_ps, t_end_ps;
    sim_res_t track;         /* the op's first use (the resource track it is drawn on), -1 if none */
} exec_trace_op_t;

typedef struct exec exec_t;

/* Creates an executor over sim (borrowed; must outlive it). Errors: ERR_INVAL (bad config), ERR_NOMEM. */
int exec_new(sim_t *sim, const exec_config_t *cfg, exec_t **out, err_t *e);
/* Frees the executor, its sessions and their providers (destroy is called). NULL is ok. */
/* Starts the measured window now: the latency, TTFT, prefill, admission-wait and per-session rate
 * histograms and the turn counters forget what came before (a run's warm-up); the token counters
 * keep counting (callers take differences). */
void exec_stats_window_start(exec_t *x);
void exec_free(exec_t *x);

/* Adds a session: it arrives at spec->arrival_s. Arrays are copied; the provider is owned by the
 * executor from now on (also on error). Errors: ERR_INVAL (gpu out of range, no turns, a turn with
 * no decode tokens, negative think time), ERR_NOMEM. */
int exec_add_session(exec_t *x, const exec_session_spec_t *spec, err_t *e);

/* Results so far (valid until exec_free or the next call). */
const exec_stats_t *exec_stats(const exec_t *x);
/* The statistics of group g's sessions alone (valid until exec_free or the next call): what a
 * session's own events count (latencies, TTFT, tokens, turns and their SLO, admission, memory
 * waits, preemptions, evictions, per-session rates); what belongs to the box (lost_ps, plans,
 * standalone and actual sums, launch-thread time) is left 0. NULL: g is not below n_groups. */
const exec_stats_t *exec_group_stats(const exec_t *x, uint32_t g);
/* Turn times of the whole box so far, cheap enough to ask often: the turns completed since the run
 * began and their summed durations (exec_stats_t.turns_all, turn_all_s), and the turns in progress
 * now (a session's first turn from its arrival, admitted or not; not the think time between turns)
 * and the time since each became ready, summed (s). */
void exec_turn_times(const exec_t *x, uint64_t *done, double *done_s, uint64_t *open, double *open_s);
/* The recorded timeline ops (first timeline_plans plans), in completion order. */
const exec_trace_op_t *exec_timeline(const exec_t *x, size_t *n);

/* Names of the extra lost-time categories after the resources ("cap", "launch", "timeslice"). */
const char *exec_lost_name(int extra);
/* The serving modes' names, indexed by exec_mode_t, NULL-terminated: the one list of them. */
extern const char *const exec_mode_names[];
/* Name of a mode ("streams", "processes", ...; "?" if none), and parse one (-1 if unknown). */
const char *exec_mode_name(exec_mode_t m);
int exec_mode_parse(const char *s);

#ifdef __cplusplus
}
#endif
#endif
