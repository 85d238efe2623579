/* replay — one session of a replay workload (docs/replay.md, kernels/replay_fmt.h) as a plan
 * provider (sim/plan.h): every decode step is the session's op list, one plan op per replay op,
 * costed with odsim's calibrated forms (models/cost.h):
 *
 *   replay op  plan op                  cost form (parameters)
 *   h2d, d2h   copy engine, one flow    cost_ce_chain: ce_latency + (P − 1)·ce_b2b_gap + P·B / link;
 *                                       the first call's copy_launch, then a host op holding the
 *                                       launch thread (P − 1)·copy_launch (the other P − 1 calls)
 *   h2d2d      copy engine, 2D          cost_transfer COST_CE: ce_latency + P·ce2d_row + bytes / h2d,
 *                                       or COST_CE_STRIDED (P·ce2d_page_row) when the pitch is a host
 *                                       page or more; copy_launch
 *   h2dbatch   copy engine, batched     cost_transfer COST_CE_BATCH: ce_latency + P·cebatch_piece +
 *                                       bytes / h2d; copy_launch
 *   gather     SM gather (GPU)          cost_transfer COST_SM_GATHER over region `span`, as a gather
 *                                       re-reading its rows (COST_GATHER_ALONE: a step re-reads the
 *                                       same pieces); launch_us
 *   hbm        memory-bound kernel      cost_kernel kind hbm_stream: kernel_latency + bytes /
 *                                       (kernel_mem_eff·hbm); launch_us
 *   compute    FP32 compute kernel      cost_compute_fp32: kernel_latency + flops / fp32_TFLOPS over
 *                                       the SMs; launch_us
 *   gemm       GEMM kernel              cost_gemm_op at batch 1: gemm_latency + max(2·(kn + m(k + n))
 *                                       / (gemm_mem_eff·hbm), 2mnk / (gemm_compute_eff·bf16 peak));
 *                                       launch_us
 *   spin       GPU op, no work          its `us` as fixed time; launch_us
 *   host       host op (CPU)            no work; its launch holds the launch thread `us`
 *   sync       —                        the next op is host_sync, after every op issued before it
 *
 * A replay stream s is plan stream s; host ops (and the calls of a chain) go on REPLAY_HOST_STREAM,
 * which no GPU op uses. `after` ids become dependencies (on a sync: none; it has no op). The step's
 * implicit final sync is the plan's end; idle_us between steps is the engine's (exec_turn_t
 * step_idle_s), not the plan's. The session holds its region in host memory and each op's own device
 * buffer in HBM (its footprint). */
#ifndef ODSIM_MODELS_REPLAY_H
#define ODSIM_MODELS_REPLAY_H

#include <stdint.h>
#include "common/err.h"
#include "kernels/replay_fmt.h"
#include "models/cost.h"
#include "models/hwcat.h"
#include "sim/plan.h"
#include "sim/sim.h"

#define REPLAY_HOST_STREAM RF_MAX_STREAMS   /* the plan stream of host ops */
#define REPLAY_NO_OP UINT32_MAX             /* a replay op without a plan op of its own (sync) */

/* What a replay op is called in the plan (a user plan's op kinds and layers, models/uplan.h): kind
 * (an op kind, or -1 for the replay kind's own) and layer (PLAN_NO_LAYER: per step). */
typedef struct replay_label {
    int kind;
    uint16_t layer;
} replay_label_t;

/* Replay op ro's plan op(s) with the forms above, without dependencies or layer: out[0] the op (for a
 * plain copy chain, out[1] the host op of its other calls), *n_out of them (0 for a sync). Errors:
 * ERR_NOTFOUND (a compute op on a GPU without fp32_TFLOPS), ERR_INVAL (an unknown kind). */
int replay_cost_op(const rf_op_t *ro, const cost_t *c, const cost_paths_t *pa, plan_op_t out[2], uint32_t *n_out,
                   err_t *e);

/* Appends session s's step to out (not reset), costed on paths pa: each op's plan op(s) as
 * replay_cost_op gives them, its `after` ids and syncs as dependencies (above); labels (NULL, or one
 * per op) rename the ops. plan_of[i] (s->n_ops entries) is replay op i's plan op, REPLAY_NO_OP for a
 * sync. Errors: those of replay_cost_op naming the op, ERR_NOMEM. */
int replay_cost_session(const rf_session_t *s, const cost_t *c, const cost_paths_t *pa, const replay_label_t *labels,
                        plan_t *out, uint32_t *plan_of, err_t *e);

typedef struct replay_prov replay_prov_t;

/* A provider for session `session` of w (copied) on machine hw, costs from cost (borrowed: both must
 * outlive the provider). Errors: ERR_INVAL (no such session), ERR_NOMEM. */
int replay_new(const rf_workload_t *w, uint32_t session, const hw_t *hw, const cost_t *cost, replay_prov_t **out,
               err_t *e);
/* Frees a provider never given to an engine. NULL is ok. */
void replay_free(replay_prov_t *p);
/* Wraps p for the engine (which owns it from then on and frees it on destroy). */
plan_provider_t replay_wrap(replay_prov_t *p);

/* Builds the session's step into out (reset here) for GPU gpu of sim (resources named as
 * models/hwinst.h says): the same plan every step. Errors: ERR_NOTFOUND (a resource missing, or a
 * compute op on a GPU without fp32_TFLOPS, naming the op), ERR_INVAL, ERR_NOMEM. */
int replay_build(replay_prov_t *p, const sim_t *sim, int gpu, plan_t *out, err_t *e);
/* The plan op of replay op i in the plans built (REPLAY_NO_OP for a sync, or i out of range). */
uint32_t replay_plan_op(const replay_prov_t *p, uint32_t i);
/* Host and device bytes the session holds: its region, and every op's device buffer. */
void replay_footprint(const rf_session_t *s, double *hbm_bytes, double *host_bytes);

#endif
