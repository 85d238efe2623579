/* plan_replay — a built-in method's plan (one decode step or prefill chunk of one session) as a
 * replay workload (docs/replay.md), so that `kbench replay` can run any plan odsim builds: `odsim
 * plan --emit-replay FILE`. The mapping, op by op (approximate: see plan_replay_note):
 *
 *   plan op                               replay op(s)
 *   copy engine, host->device             host_sync ops (odsim's batched form, cebatch) and kind
 *                                         h2d_batch: h2dbatch; an h2d_copy of one piece: h2d; else
 *                                         odsim's one-copy form (ce_latency + rows): h2d2d over its
 *                                         own pieces as contiguous rows
 *   copy engine, device->host             d2h (at most 256 pieces: each is an API call)
 *   GPU op reading host memory            gather over the host span of the op's layer
 *   gemm, lm_head                         gemm ops of the model's shapes (QKV; O, MLP up, MLP down;
 *                                         the LM head in parts of n ≤ 65536), m = the tokens
 *   other kernel                          hbm of its HBM bytes, then a spin of the rest of its time
 *                                         alone; a spin alone where streaming its bytes would take
 *                                         longer than the op (its bytes come from the L2)
 *   CPU op                                host of its time
 *   host_sync                             a sync before the op
 *
 * Transfers: the piece size is the power of two nearest the op's bytes per piece (16 B at least),
 * the pieces as many as carry the op's bytes. Dependencies across streams become `after` (the 8
 * latest), streams fold into 0..7. */
#ifndef ODSIM_CLI_PLAN_REPLAY_H
#define ODSIM_CLI_PLAN_REPLAY_H

#include <stdint.h>
#include "common/err.h"
#include "kernels/replay_fmt.h"
#include "models/cost.h"
#include "models/hwcat.h"
#include "models/llm.h"
#include "sim/plan.h"
#include "sim/sim.h"

typedef struct plan_replay_in {
    const plan_t *plan;
    const sim_t *sim;          /* the machine the plan was built for (GPU 0) */
    const hw_t *hw;
    const cost_t *cost;        /* the forms the plan was costed with (read quietly: notes nothing) */
    const llm_t *llm;          /* the model whose projections the plan's GEMMs are */
    const double *span_bytes;  /* per plan op: host bytes its pieces lie in (0: just its own bytes) */
    const char *name;          /* the workload's name (docs/replay.md's charset) */
} plan_replay_in_t;

/* What the mapping changed, for the file's comment lines. */
typedef struct plan_replay_note {
    uint32_t d2h_coarsened;    /* d2h copies whose pieces were merged to at most 256 */
    uint32_t after_dropped;    /* cross-stream dependencies beyond 8 per op, dropped */
    uint32_t gemm_from_flops;  /* GEMMs whose shape came from flops and bytes, not the model */
    uint32_t spins;            /* kernels whose time (or part of it) became a spin */
    double span_clipped_bytes; /* the largest span cut down to the region's 64 GiB limit (0: none) */
    uint32_t source[RF_MAX_OPS]; /* per replay op: the plan op it stands for */
} plan_replay_note_t;

/* Zeroes *w and sets the header a one-session plan's workload has: name, mode streams, window_ms 500,
 * min_steps 10, warmup_steps 3, seed 1, one session (its ops the caller's). */
void plan_replay_header(rf_workload_t *w, const char *name);

/* Maps in->plan into *w (one session, mode streams, window_ms 500). Errors: ERR_RANGE (more than
 * RF_MAX_OPS replay ops, or a transfer beyond what the format holds, naming the plan op),
 * ERR_INVAL (the name), those of cost_paths_resolve and plan_op_alone_ps. */
int plan_replay_make(const plan_replay_in_t *in, rf_workload_t *w, plan_replay_note_t *note, err_t *e);

/* Writes w to path atomically (common/atomicio.h), after comment lines naming `what` (the command
 * and plan it came from) and saying what the mapping approximates and dropped (note; NULL: w is not
 * a mapping but exact, a user plan's step, and no such line is written). Errors:
 * ERR_IO naming the path. */
int plan_replay_write(const char *path, const rf_workload_t *w, const char *what, const plan_replay_note_t *note,
                      err_t *e);

#endif
