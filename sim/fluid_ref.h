/* fluid_ref — a naive reference solver for weighted max-min with rate caps, to check fluid against.
 *
 * Textbook progressive filling, recomputing every sum from scratch at each step: O(steps · flows ·
 * uses), no incremental state, so it shares no shortcut (or bug) with the incremental solver. Used by
 * the tests and by `odsim bench` to check rates. */
#ifndef ODSIM_SIM_FLUID_REF_H
#define ODSIM_SIM_FLUID_REF_H

#include <stddef.h>
#include <stdint.h>

typedef struct fluid_ref_flow {
    double weight;      /* > 0 */
    double cap_rate;    /* > 0, or 0 for none */
    size_t n_uses;      /* ≥ 1 unless cap_rate > 0 */
    const int32_t *res; /* constraint indices into capacity[] */
    const double *coef; /* > 0 */
} fluid_ref_flow_t;

/* Fills rate[i] for each of the n flows sharing constraints of the given capacities. Returns 0, or
 * ERR_NOMEM (rate untouched). */
int fluid_ref_solve(size_t n_res, const double *capacity, size_t n, const fluid_ref_flow_t *flows,
                    double *rate);

#endif
