/* exec_int — the executor's internal state and the calls its parts (sim/exec*.c, sim/policy*.c) make
 * on each other. Not for use outside sim/. */
#ifndef ODSIM_SIM_EXEC_INT_H
#define ODSIM_SIM_EXEC_INT_H

#include <math.h>
#include "sim/exec.h"

typedef struct ctx ctx_t;
typedef struct run run_t;
typedef struct sess sess_t;
typedef struct gpu gpu_t;
typedef struct exec_policy exec_policy_t;

/* One op of a running plan (several sessions' ops when merged). */
typedef struct xop {
    plan_op_t op;            /* copy; dependency fields unused */
    run_t *run;
    uint32_t batch;          /* sessions it serves */
    uint32_t pending;        /* predecessors not done (explicit and stream order) */
    uint32_t succ_first, n_succ;
    bool launched, started, waiting_gpu, done;
    bool turn_given;         /* gathers_exclusive: taken off the wait list, starts now */
    bool segment_start;      /* with CUDA graphs: first op of a graph segment */
    bool q_blocked;          /* behind an op of its hardware queue that has not started */
    struct xop *q_next;      /* the op launched after it on its hardware queue, waiting for it */
    int8_t queue;            /* its hardware queue, -1 if none */
    uint32_t pos;            /* issue position in the run */
    uint32_t member;         /* index in the run's members of the (first) session whose op it is */
    sim_ps_t t_launch, t_deps, t_ready, t_start, t_end; /* t_deps: predecessors done */
    uint64_t session;
} xop_t;

struct run {
    exec_t *x;
    ctx_t *ctx;              /* the CUDA context it runs in (hardware queues, time slices) */
    ctx_t *thread;           /* the context whose launch thread issues it: ctx, or the session's own
                              * thread (exec_config_t.launch_per_session) */
    gpu_t *gpu;
    xop_t *ops;              /* in issue order */
    uint32_t n_ops, n_done;
    uint32_t *succ;          /* successor lists, sliced by xop.succ_first/n_succ */
    uint32_t next_launch;    /* first op not yet launched */
    bool in_launch_queue;
    run_t *launch_next;      /* launch-thread FIFO link */
    sess_t **members;
    uint32_t n_members;
    sim_ps_t t_begin;
    sim_ps_t t_window;       /* when an event recorded before its first op would fire: its beginning,
                              * or later when that op waited behind its hardware queue */
    uint64_t seq;            /* plan index (timeline) */
    bool traced;
    run_t *prev, *next;      /* the executor's list of runs in flight */
};

/* A CUDA context: its launch thread (a serial FIFO server) and its hardware work queues. */
struct ctx {
    exec_t *x;
    uint64_t serial;         /* 1, 2, ... in creation order: names it after it is freed with its session */
    struct xop *hwq_tail[EXEC_MAX_HW_QUEUES]; /* last op launched on each queue, until it starts */
    uint32_t streams_made;   /* streams given a queue so far (round robin) */
    sim_ps_t busy_ps;        /* total launch time */
    run_t *launching;        /* the run whose next op is being launched (NULL: idle) */
    run_t *q_head, *q_tail;
    sim_ps_t slice_debt_ps;  /* processes: how far its last slice ran past its length (an op in
                              * flight is not preempted): taken off its next slice */
};

/* Waiting GPU ops of other contexts under time slicing, FIFO. */
typedef struct gpu_wait {
    xop_t **ops;
    size_t n, cap, head;
} gpu_wait_t;

struct gpu {
    int index;
    ctx_t *owner;            /* processes: context whose kernels hold the GPU (NULL: idle or switching) */
    uint32_t owner_running;
    sim_ps_t slice_start;    /* processes: when the owner got the GPU */
    sim_ps_t slice_ps;       /* processes: the owner's slice, timeslice_ps less its debt */
    uint64_t last_owner;     /* processes: serial of the context the GPU holds the state of (0: none;
                              * a serial, as that context may have been retired with its session) */
    bool switching;          /* processes: passing to the next waiting context */
    gpu_wait_t waits;
    uint32_t kind_running[3];/* gathers_exclusive: ops running by excl_kind */
    gpu_wait_t turn_waits;   /* gathers_exclusive: ops waiting for the other kind to drain, FIFO */
    bool in_turns, turns_again;
    bool iterating;          /* batching: an iteration is running */
    sess_t **ready;          /* batching: sessions waiting for the next iteration */
    size_t n_ready, cap_ready;
    uint32_t live;           /* admitted, unfinished sessions */
    uint32_t waiting_mem;    /* admitted sessions preempted for memory */
    bool in_mem_kick, mem_kick_again;
    bool kick_pending;       /* batching: a kick_ev is scheduled */
    exec_t *x;
    sess_t **admitq;         /* sessions waiting for memory (admission or growth), FIFO */
    size_t n_admitq, cap_admitq;
};

typedef enum { S_ARRIVING, S_WAIT_MEM, S_THINKING, S_READY, S_RUNNING, S_DONE } sess_state_t;

struct plan_env {
    exec_t *x;
    sess_t *s;
};

struct sess {
    exec_t *x;
    uint64_t id;
    gpu_t *gpu;
    ctx_t *ctx;
    ctx_t *thread;           /* its own launch thread (launch_per_session), NULL: ctx's */
    plan_provider_t prov;
    plan_env_t env;
    exec_turn_t *turns;
    size_t n_turns, turn;
    bool open_loop;
    sess_state_t state;
    uint64_t context, final_tokens;
    uint32_t prefill_left, decode_left;
    plan_request_t req;      /* the request of the plan being built or run */
    plan_t plan;
    plan_t fine;             /* coarse mode: the provider's plan, before plan_coarsen */
    plan_request_t built;    /* coarse mode: the request s->plan was built for */
    bool have_built;
    uint64_t plans;
    bool admitted, first_token_done;
    sim_ps_t t_arrive, t_turn_ready, t_first_token, t_decode_ps;
    uint64_t decoded;
    uint64_t window_decoded;  /* decoded and t_decode_ps when the measured window started */
    sim_ps_t window_decode_ps;
    double hbm_held, host_held;
    int8_t *queue_of;        /* hardware queue by plan stream (-1: none yet); NULL until first needed */
    uint32_t group;          /* exec_session_spec_t.group */
    size_t slot;             /* its index in exec_t.sessions */
};

struct exec {
    sim_t *sim;
    exec_config_t cfg;
    const exec_policy_t *pol; /* cfg.mode's */
    gpu_t *gpus;
    ctx_t *gpu_ctx;          /* streams and batching: one process (host thread) per GPU */
    sess_t **sessions;       /* in the order added; NULL: retired (compacted once half are) */
    size_t n_sessions, cap_sessions, n_retired_slots;
    uint64_t sessions_added; /* ever added (launch threads with one per session) */
    uint64_t ctx_serial;     /* the last ctx_t.serial given */
    /* Finished sessions are retired (folded into the figures below, then freed) by the next kick_ev,
     * an event of their instant, so no caller still holds them. */
    sess_t **retiring;
    size_t n_retiring, cap_retiring;
    hist_t **retired_tps;    /* retired sessions' tokens/s samples in the window: [0] all, [1 + g] group g */
    sim_ps_t retired_busy_ps;/* retired sessions' own contexts' and threads' launch time */
    exec_stats_t stats;
    exec_stats_t *groups;    /* cfg.n_groups groups' own statistics (NULL: none) */
    uint64_t plans_started;
    exec_trace_op_t *timeline;
    size_t n_timeline, cap_timeline;
    sim_pool_t *hbm_pool;
    run_t *runs;             /* in flight (freed by exec_free when the simulation stops first) */
    uint64_t jitter_state;   /* SplitMix64 state of the ops' jitter */
    sess_t **arriving;       /* sessions arrived at this instant, admitted together by id */
    size_t n_arriving, cap_arriving;
    bool arrivals_pending;
};

/* A serving policy (exec_config_t.mode): how sessions reach the GPU. Each hook may be NULL. */
struct exec_policy {
    bool own_ctx;            /* each session its own CUDA context and launch thread (else one per GPU) */
    bool batching;           /* one iteration at a time per GPU, the batched sessions' plans merged
                              * (no hardware queues, no coarse plans) */
    /* o is launched, its predecessors done and its queue's turn come: true when the policy holds it
     * back (it starts it later with exec_op_start). */
    bool (*op_hold)(exec_t *x, xop_t *o);
    /* o, which the policy let start, is done: op_ending before its successors are told, op_ended
     * after (so that they have their chance first). */
    void (*op_ending)(exec_t *x, xop_t *o);
    void (*op_ended)(exec_t *x, xop_t *o);
    /* s is ready for its next plan (NULL: it is built and run alone at once). */
    void (*sess_ready)(sess_t *s);
    /* A run on g is complete. */
    void (*run_done)(exec_t *x, gpu_t *g);
    /* After every event of the instant exec_kick_later was called in: g may act on what changed. */
    void (*gpu_kick)(exec_t *x, gpu_t *g);
};

/* The policy of a mode, NULL for none (sim/policy.c). */
const exec_policy_t *exec_policy_of(exec_mode_t m);
extern const exec_policy_t exec_policy_processes; /* sim/policy_timeslice.c */
extern const exec_policy_t exec_policy_lockstep, exec_policy_continuous; /* sim/policy_batch.c */

static inline double ps_to_s(sim_ps_t t) { return (double)t / (double)SIM_PS_PER_S; }

/* The statistics an event of s counts in: the box's, then its group's when groups are kept.
 * Returns how many of st[0..2) it filled. */
static inline size_t exec_sess_stats(const sess_t *s, exec_stats_t *st[2])
{
    st[0] = &s->x->stats;
    if (!s->x->groups) return 1;
    st[1] = &s->x->groups[s->group];
    return 2;
}

/* sim/exec.c: failing the simulation, growing arrays, the policy's deferred kick. */
void exec_fail(exec_t *x, int code, const char *what);
void exec_fail_err(exec_t *x, const err_t *e);
int exec_push_ptr(void ***arr, size_t *n, size_t *cap, void *p);
/* Calls the policy's gpu_kick for g after every other event of this instant (once however often
 * called), so sessions that become ready at the same time (arrivals, the end of an iteration) are
 * seen together. */
void exec_kick_later(exec_t *x, gpu_t *g);
/* Queues s, finished, to be retired by the next kick_ev (exec_sess_finish schedules one). */
void exec_sess_retire_later(sess_t *s);

/* sim/exec_run.c: a run of the members' current plans on ctx; its completion. */
int exec_run_start(exec_t *x, gpu_t *g, ctx_t *c, sess_t **members, uint32_t n, err_t *e);
void exec_run_complete(run_t *r);
/* Unlinks r from the runs in flight and frees it. NULL is ok. */
void exec_run_free(run_t *r);
/* sim/exec_launch.c: queues r's next op on its context's launch thread when it can be launched. */
void exec_run_kick_launch(run_t *r);
/* Takes r off its launch thread's FIFO (a run completing there: a predecessor done while r's next op
 * was being launched queues r again, and its ops may all end before the thread comes back to it). */
void exec_run_unqueue(run_t *r);
/* sim/exec_op.c: starting and finishing ops. */
void exec_op_try_start(xop_t *o);
void exec_op_start(xop_t *o);
int exec_op_cost(const xop_t *o, plan_cost_t *c);
sim_ps_t exec_op_alone_ps(const exec_t *x, const xop_t *o, const plan_cost_t *c);
bool exec_handoff(const exec_t *x, const xop_t *pred, const xop_t *succ);
/* sim/exec_jitter.c: the ops' random variation. */
sim_ps_t exec_handoff_draw_ps(exec_t *x);
void exec_op_jitter(exec_t *x, const xop_t *o, plan_cost_t *c);
/* sim/exec_turns.c: gathers and kernels taking turns (gathers_exclusive). */
bool exec_turn_wait(xop_t *o);
void exec_turn_done(xop_t *o);
/* sim/exec_admit.c: memory and admission. */
int exec_sess_hold(sess_t *s, uint64_t tokens, err_t *e);
void exec_sess_release(sess_t *s);
void exec_sess_restart(sess_t *s, uint64_t tokens);
void exec_sess_finish(sess_t *s, bool evicted);
void exec_sess_blocked(sess_t *s);
uint32_t exec_next_chunk(const sess_t *s);
void exec_mem_kick(exec_t *x, gpu_t *g);
void exec_sess_arrive(sim_t *sim, void *arg);
/* sim/exec_sess.c: sessions' turns and plans. */
void exec_sess_start_turn(sess_t *s);
int exec_sess_build(sess_t *s, err_t *e);
void exec_sess_next(sess_t *s);
void exec_sess_plan_done(sess_t *s, sim_ps_t t_begin, sim_ps_t t_window);
int exec_open_turn_slo(const sess_t *s, sim_ps_t now);

#endif
