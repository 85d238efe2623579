/* plan — the interface between attention methods (models/) and the engine (sim/).
 *
 * For each session, a *plan provider* builds on demand the DAG of operations of its next decode step
 * or prefill chunk. The engine executes the DAG on the box's resources (sim/exec.h) and never looks
 * inside a method: an op is a kind (a small integer whose name models/ owns, carried for reports),
 * an executor, demands on named resources, a cost and dependencies.
 *
 * An op runs as one fluid flow: after its launch (host CPU time on the launch thread) and its
 * dependencies, it waits `cost.latency_ps`, then moves `cost.work` units at the rate the max-min
 * solver gives it across `uses` (each unit of work consumes `coef` units of each resource), never
 * faster than `cost.cap_rate`. Bytes of a host→device copy cross host DRAM, the link direction, the
 * duplex total and HBM (coef 1 each); a memory-bound kernel reads HBM; a compute-bound one uses the
 * GPU's FLOP/s constraint; an SM gather is capped by the fitted row rate for its piece and region.
 *
 * Batching: ops carrying the same non-zero `merge_key` in the plans of sessions batched together
 * (lockstep or continuous batching) execute once for all of them; the engine then evaluates
 * `cost_fn(cost_model, batch)` for the batch size (a projection reads its weights once and its FLOPs
 * grow with the batch). Without cost_fn the op's own cost is used whatever the batch.
 *
 * Ownership: a plan_t is a growable buffer owned by whoever created it with plan_init; providers fill
 * the one the engine passes them (after plan_reset) and keep no pointer into it.
 *
 * Providers keep state between steps (caches, the HBM tail of new tokens) and allocate memory through
 * plan_env (which enforces capacity): a failed allocation is an error the engine reports, never a
 * silent overflow. */
#ifndef ODSIM_SIM_PLAN_H
#define ODSIM_SIM_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"
#include "sim/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLAN_MAX_USES 8

/* Where an op executes. GPU ops are kernels (they occupy SMs and, between separate processes
 * without MPS, are time-sliced); COPY ops run on a copy engine; CPU ops on a host thread. */
typedef enum {
    PLAN_EXEC_GPU = 0,
    PLAN_EXEC_COPY_H2D,
    PLAN_EXEC_COPY_D2H,
    PLAN_EXEC_CPU
} plan_exec_t;

typedef struct plan_use {
    sim_res_t res;  /* resource id (sim_res_find / plan_env_res) */
    double coef;    /* units of res consumed per unit of the op's work, > 0 */
} plan_use_t;

/* What an op costs, for a given batch size. */
typedef struct plan_cost {
    double work;          /* units (bytes or FLOPs) moved by the op's flow, ≥ 0 */
    double cap_rate;      /* units/s the op can never exceed (piece-size or row-rate limit); 0 = none */
    sim_ps_t latency_ps;  /* fixed time before work moves (kernel ramp, DMA setup) */
} plan_cost_t;

/* Cost of one execution serving `batch` ≥ 1 sessions. Returns 0 or an ERR_* code. */
typedef int (*plan_cost_fn)(const void *cost_model, uint32_t batch, plan_cost_t *out);

typedef struct plan_op {
    uint16_t kind;          /* op kind (models/opkind.h); carried, never interpreted */
    uint16_t layer;         /* model layer, or PLAN_NO_LAYER for per-step ops */
    uint8_t exec;           /* plan_exec_t */
    uint8_t stream;         /* in-order queue within the session: ops of one stream start in
                             * the order they were added (CUDA stream semantics) */
    bool host_sync;         /* its launch waits until its dependencies completed (the host needs
                             * their results, e.g. winner indices for a host-issued batched copy) */
    uint8_t n_uses;
    plan_use_t uses[PLAN_MAX_USES];
    plan_cost_t cost;       /* cost for batch 1, or whatever the batch when cost_fn is NULL */
    plan_cost_fn cost_fn;   /* optional: cost as a function of the merged batch size */
    const void *cost_model; /* argument of cost_fn; must outlive the plan's execution */
    double weight;          /* max-min sharing weight, > 0 (0 is read as 1) */
    sim_ps_t launch_ps;     /* host CPU time to launch it (0: no launch, e.g. inside a graph) */
    sim_ps_t latency_extra_ps; /* fixed time it takes beyond its cost's latency (cost_fn's included;
                                * negative: less, never below 0): e.g. a timing event recorded in its
                                * stream right before it, set by whoever times the plan */
    uint64_t merge_key;     /* 0 = none; equal keys from batched sessions execute once */
    double bytes_host;      /* bookkeeping for reports and tests: bytes the op reads from or */
    double bytes_hbm;       /*   writes to host DRAM and HBM, and FLOPs it performs, for batch 1 */
    double flops;
    uint32_t pieces;        /* pieces a transfer is made of (0 when not a transfer) */
    uint32_t dep_first;     /* private: slice of plan_t.deps */
    uint32_t n_deps;
} plan_op_t;

#define PLAN_NO_LAYER 0xffff

typedef enum { PLAN_DECODE = 0, PLAN_PREFILL = 1 } plan_phase_t;

typedef struct plan {
    plan_op_t *ops;
    uint32_t n_ops, cap_ops;
    uint32_t *deps;         /* predecessors of all ops, sliced by dep_first/n_deps */
    uint32_t n_deps, cap_deps;
    plan_phase_t phase;
    uint32_t tokens;        /* tokens this plan produces (decode: 1) or ingests (prefill chunk) */
    sim_ps_t graph_launch_ps; /* with CUDA graphs: one launch for the whole plan of this cost */
} plan_t;

/* Initialises an empty plan (no allocation yet). */
void plan_init(plan_t *p);
/* Frees the plan's buffers; p itself is the caller's. */
void plan_free(plan_t *p);
/* Empties the plan, keeping its buffers. */
void plan_reset(plan_t *p, plan_phase_t phase, uint32_t tokens);

/* Appends a copy of *op with the given predecessors (ids of ops already in the plan, so a plan is
 * acyclic by construction) and returns its id in *id (may be NULL). Errors: ERR_INVAL (a dependency
 * id not below the new op's id, n_uses > PLAN_MAX_USES, negative work/cap/latency, coef ≤ 0,
 * no use and no cap with work > 0), ERR_NOMEM. */
int plan_add(plan_t *p, const plan_op_t *op, const uint32_t *deps, uint32_t n_deps, uint32_t *id,
             err_t *e);

/* Adds one dependency edge pred → succ between existing ops (edges across layers, e.g. a speculative
 * prefetch of layer l+1 issued before layer l's kernels). Ops are issued in id order, as a host thread
 * issues CUDA work, so pred < succ. Errors: ERR_INVAL (unknown op), ERR_CYCLE (pred ≥ succ: the edge
 * waits on work issued later, which closes a cycle with issue order), ERR_NOMEM. */
int plan_add_edge(plan_t *p, uint32_t pred, uint32_t succ, err_t *e);

/* Checks a plan built by any means: every predecessor issued before its successor (ERR_CYCLE
 * naming the op otherwise), slices in range, costs valid (ERR_INVAL). */
int plan_validate(const plan_t *p, err_t *e);

/* Totals over the plan, for reports and tests (batch 1). */
typedef struct plan_totals {
    double bytes_host, bytes_hbm, flops;
    double work_by_res_sum;  /* Σ work·coef over all uses (checks against the resources' counters) */
    uint32_t n_ops;
} plan_totals_t;
void plan_totals(const plan_t *p, plan_totals_t *out);

/* The critical-path time of the plan alone on an idle machine: each op takes
 * latency + work / min(cap, min_i capacity_i/coef_i), starts after its predecessors and after the
 * previous op of its stream, a kernel handoff_ps after a copy it waits on (exec_config_t's
 * copy_handoff_ps); launches and sharing between concurrent ops are ignored. Used for standalone
 * step time and as the ideal-profile closed form. Errors: as plan_validate. */
int plan_standalone_ps(const plan_t *p, const sim_t *sim, sim_ps_t handoff_ps, sim_ps_t *out, err_t *e);

/* Whether a kernel succ waiting on pred pays the copy engine's hand-off (pred is a copy). */
bool plan_handoff(const plan_op_t *pred, const plan_op_t *succ);

/* The op's cost serving `batch` sessions into *out: its cost, or its cost_fn's, with latency_extra_ps
 * added to the latency (not below 0). Returns 0 or the cost_fn's error code. */
int plan_op_cost(const plan_op_t *o, uint32_t batch, plan_cost_t *out);

/* One op alone on an idle machine: latency + work / min(cap, min_i capacity_i/coef_i), its cost at
 * batch 1 (plan_op_cost). Errors: ERR_INVAL (a resource not in sim, the cost model failed). */
int plan_op_alone_ps(const plan_op_t *o, const sim_t *sim, sim_ps_t *out, err_t *e);

/* Each op's finish time as plan_standalone_ps counts them (finish[n_ops], ps from the plan's start)
 * and its time alone (alone[n_ops], or NULL). Errors: as plan_validate and plan_op_alone_ps. */
int plan_finish_ps(const plan_t *p, const sim_t *sim, sim_ps_t handoff_ps, sim_ps_t *finish, sim_ps_t *alone, err_t *e);

/* The coarse form of a plan (for long studies): one op per resource the plan touches, carrying all
 * of its demand, capped so that alone it takes as long as the plan's ops using it would one after
 * another (at most the whole step), all in parallel with one delay op that holds the launch thread
 * for all the plan's launches and then waits out the rest of its critical path. Alone on an idle
 * machine the coarse plan takes as long as the fine one (hand-offs of handoff_ps included); under sharing each resource slows as its
 * ops would, but the order within a step is lost (a step overlaps its own phases). out is reset
 * first; merge keys are dropped (not for batching modes). Errors: as plan_validate, ERR_NOMEM. */
int plan_coarsen(const plan_t *in, const sim_t *sim, sim_ps_t handoff_ps, plan_t *out, err_t *e);

/* ---- what the engine offers providers ----------------------------------------------------- */

typedef struct plan_env plan_env_t;  /* owned by the engine */

/* Resource id by name (e.g. "gpu0.h2d"), or -1 when the box has no such resource. */
sim_res_t plan_env_res(const plan_env_t *env, const char *name);
/* The simulator (read-only use: capacities, time). */
const sim_t *plan_env_sim(const plan_env_t *env);
/* Takes or returns device (HBM) or host memory for this session. Errors: ERR_CAPACITY with numbers. */
int plan_env_alloc(plan_env_t *env, bool hbm, double bytes, err_t *e);
void plan_env_release(plan_env_t *env, bool hbm, double bytes);
/* The GPU index this session runs on and the session id. */
int plan_env_gpu(const plan_env_t *env);
uint64_t plan_env_session(const plan_env_t *env);

/* ---- the provider interface --------------------------------------------------------------- */

typedef struct plan_request {
    plan_phase_t phase;
    uint64_t context_tokens;   /* tokens already in the session's context before this plan */
    uint32_t new_tokens;       /* decode: 1; prefill: tokens of this chunk */
    uint64_t step;             /* index of this plan within the session */
} plan_request_t;

typedef struct plan_provider_ops {
    const char *name;
    /* Builds the plan for req into out (already reset by the engine). May allocate through env.
     * Returns 0 or an ERR_* code with e set. */
    int (*build)(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out, err_t *e);
    /* Told when the plan built for req has completed (e.g. to flush a finished tail chunk's
     * bookkeeping); may be NULL. */
    int (*completed)(void *self, plan_env_t *env, const plan_request_t *req, err_t *e);
    /* Memory the session holds at `context_tokens` tokens (K/V, index, HBM tail, caches): HBM and
     * host bytes. The engine takes the difference from its pools as the context grows, or the final
     * size up front, by admission policy; may be NULL (the session holds nothing). */
    int (*footprint)(void *self, uint64_t context_tokens, double *hbm_bytes, double *host_bytes, err_t *e);
    /* Releases what the provider allocated itself through env and frees self; may be NULL. */
    void (*destroy)(void *self, plan_env_t *env);
} plan_provider_ops_t;

typedef struct plan_provider {
    const plan_provider_ops_t *ops;
    void *self;
} plan_provider_t;

#ifdef __cplusplus
}
#endif
#endif
