/* protocol — how kbench timed a case, as a wrapper around a method's plan provider: the plan the
 * method's provider builds for a decode, changed into what kbench's timed window held.
 *
 * The method's provider (models/provider.h) plans a decode and its cost forms mean "as in a decode"
 * kbench times otherwise:
 *   - a layer step holds the layers alone, no LM head and no sampling (layers_only);
 *   - a gather timed alone re-reads the same rows in the same order with nothing in between, so its
 *     address translations stay cached up to gather_warm_rows (gathers_reread: COST_GATHER_ALONE);
 *   - its kernels suite times each kernel alone after an L2 flush, not with the layer's GEMMs queued
 *     behind it nor over scores its scan just left in the L2 (kernels_alone: cost_in_layer_ps off);
 *   - a step's repetitions may start with the GPU busy, so the first op's launch falls before the
 *     timed window opens (first_launch_hidden). */
#ifndef ODSIM_VALIDATION_PROTOCOL_H
#define ODSIM_VALIDATION_PROTOCOL_H

#include <stdbool.h>

#include "common/err.h"
#include "models/calib.h"
#include "models/hwcat.h"
#include "models/method.h"
#include "sim/plan.h"

typedef struct protocol {
    bool layers_only;         /* the layers alone: no LM head, no sampling */
    bool gathers_reread;      /* each SM gather from the host re-reads its rows back to back */
    bool kernels_alone;       /* each kernel alone after an L2 flush */
    bool first_launch_hidden; /* the plan's first op launched before the window opened */
} protocol_t;

typedef struct protocol_prov protocol_prov_t;

/* A wrapper timing method mt (borrowed, must outlive it) as `how` says, around a provider of its own
 * on machine hw with costs from cal (both borrowed). Errors: those of provider_new_shared; ERR_NOMEM. */
int protocol_new(const method_t *mt, const hw_t *hw, calib_t *cal, const protocol_t *how, protocol_prov_t **out,
                 err_t *e);

/* Frees a wrapper never given to an engine. NULL is ok. */
void protocol_free(protocol_prov_t *pp);

/* The method's plan of req for GPU gpu of sim (provider_build) into out (reset here), as the
 * protocol times it. Errors: those of provider_build; ERR_NOMEM. */
int protocol_build(protocol_prov_t *pp, const sim_t *sim, int gpu, const plan_request_t *req, plan_t *out, err_t *e);

/* The wrapped method. */
const method_t *protocol_method(const protocol_prov_t *pp);

/* The wrapper as the engine's provider (ownership passes to the engine, which calls destroy). */
plan_provider_t protocol_wrap(protocol_prov_t *pp);

#endif
