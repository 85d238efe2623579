/* provider — a method (models/method.h) as the plan provider of one session (sim/plan.h).
 *
 * Per layer a plan holds: the QKV projection (GEMM, batch-mergeable), for sparq/fathom the per-query
 * plan (wf_plan), the index fetch from host (copy engine or SM gather; queued up to `prefetch`
 * layers ahead when it does not depend on the query; Fathom's and SparQ's over the copy engine one
 * batched copy of the plane runs (index_layout contiguous) or a chain of 2D copies, one per head and
 * active channel (chunked); index_fetch auto takes the faster alone), the scan (its method's family of parameters),
 * top-k, the winner fetch (SM gather or batched copy), the split-K partial over the HBM window
 * (attn_tail) and over the winners (attn_sparse, read from the L2 where they fit), or for dense and
 * exact prefill the K/V copy and attn_dense; in decode the combine of the partials (attn_combine);
 * when the plan completes a chunk of T tokens, the quantiser and the device→host flush (a contiguous
 * index's part a strided 2D copy per KV head, a row per plane and scale run); then O
 * projection and MLP (GEMM, batch-mergeable, three kernels). Per plan: the LM head (batch-mergeable)
 * and sampling. A prefill chunk of a few tokens is planned as a decode step
 * (PROVIDER_DECODE_MAX_TOKENS).
 *
 * Streams: 0 compute, 1 host→device copies, 2 SM gathers, 3 device→host flushes.
 * Merge keys hash (model, weight dtype, phase, tokens, layer, which GEMM): equal keys come from equal
 * cost models, so the engine may evaluate any session's.
 *
 * Memory: the provider's footprint callback gives the engine its session's footprint at a context
 * (models/footprint.h): host (or tier) bytes for K/V and index, HBM for the placed index, the window
 * and the buffers; the engine takes it from its pools. Weights are per GPU (footprint_t's
 * hbm_weight_bytes), for the study to take once per GPU. */
#ifndef ODSIM_MODELS_PROVIDER_H
#define ODSIM_MODELS_PROVIDER_H

#include "common/cfg.h"
#include "common/err.h"
#include "models/calib.h"
#include "models/cost.h"
#include "models/hwcat.h"
#include "models/llm.h"
#include "models/method.h"
#include "sim/plan.h"

typedef struct provider provider_t;

/* A provider for method cfg on model m and machine hw, costs from cal (seeded from hw). hw and cal
 * are borrowed and must outlive the provider; m is copied. Errors: those of method_new and
 * cost_init; ERR_INVAL (fp8 weights on a GPU without FP8). */
int provider_new(const method_cfg_t *cfg, const llm_t *m, const hw_t *hw, calib_t *cal, provider_t **out,
                 err_t *e);

/* As provider_new, borrowing an already resolved method (it must outlive the provider): sessions of
 * one study share one method and its planner statistics. Errors: those of cost_init; ERR_INVAL. */
int provider_new_shared(const method_t *mt, const hw_t *hw, calib_t *cal, provider_t **out, err_t *e);
/* As provider_new_shared, borrowing cost forms too (cost_init of the run's profile; they must outlive
 * the provider): the sessions of a run share them (10 KB each otherwise). Errors: ERR_INVAL (fp8
 * weights on a GPU without FP8, a CXL tier the box lacks), ERR_NOMEM. */
int provider_new_costed(const method_t *mt, const hw_t *hw, const cost_t *cost, provider_t **out, err_t *e);

/* provider_new from a scenario's method map (method_cfg_bind), wrapped for the engine: out->ops
 * builds plans, gives the footprint, tells nothing on completion, and on destroy frees the provider. */
int provider_create(const cfg_node_t *method, const llm_t *m, const hw_t *hw, calib_t *cal,
                    plan_provider_t *out, err_t *e);

/* Wraps an existing provider (ownership passes to the engine, which calls destroy). */
plan_provider_t provider_wrap(provider_t *p);

/* Frees a provider that was never given to an engine. NULL is ok. */
void provider_free(provider_t *p);

/* Builds the plan of req into out (reset here) for a session on GPU gpu of sim (resources named as
 * models/hwinst.h says), without allocating memory: for `odsim plan`, tests and the engine's build.
 * Errors: ERR_NOTFOUND (a resource missing), ERR_INVAL, ERR_NOMEM. */
int provider_build(provider_t *p, const sim_t *sim, int gpu, const plan_request_t *req, plan_t *out, err_t *e);

const method_t *provider_method(const provider_t *p);
/* A prefill chunk of at most this many tokens is planned as a decode step of as many tokens (a
 * decode kernel's tile of query rows holds them): a session joining with its context already
 * offloaded reads it as a decode step does, not whole. */
#define PROVIDER_DECODE_MAX_TOKENS 16
/* Whether req is planned with the prefill formulas (method_layer's `prefill`): a prefill chunk of
 * more than PROVIDER_DECODE_MAX_TOKENS tokens. */
bool provider_prefill_formulas(const plan_request_t *req);
/* The provider's cost forms (seeded from its calibration), for those that re-cost its plans' ops. */
const cost_t *provider_cost(const provider_t *p);
/* The transfer form the provider fetches the rows of `kind` with (OPKIND_INDEX_FETCH: the index of
 * a layer shaped ly, else the winners; ly may be NULL for them), in prefill where `prefill`: a
 * copy-engine form or an SM gather's. With index_fetch auto a query's planes go the faster way alone
 * (the SM prefix gather or the copy engine's path for the index layout), weighed on the paths of
 * the last provider_build. */
cost_xfer_t provider_fetch_form(const provider_t *p, int kind, bool prefill, const method_layer_t *ly);

#endif
