/* sim — the discrete-event engine's context: clock, event queue, fluid resources, memory pools.
 *
 * One explicit context, no globals: tests and sweeps run many simulators in one process. Time is an
 * integer count of picoseconds. Events are ordered by (time, sequence number), so the same inputs give
 * byte-identical results on every build. The engine knows nothing about attention methods: it moves
 * work through capacity constraints (bytes/s, FLOP/s, SM share) and runs callbacks.
 *
 * Resources are fluid constraints, as in SimGrid: a flow crosses one or more of them, consuming
 * `coef` units of each per unit of its own progress; rates follow weighted max-min fairness with a
 * per-flow rate cap, re-solved only when a flow starts or ends or a capacity changes, and only over
 * the constraints connected to the change. A flow completes when its remaining work is under
 * SIM_WORK_EPSILON; completion times are rounded up to the next picosecond, so the loop never spins.
 *
 * Accounting: every flow knows its standalone rate (its rate alone on the idle machine, from the
 * capacities at its start). For each rate epoch it runs slower than that, the lost time
 * dt·(1 − rate/standalone) is charged to the constraint that binds it in that epoch (or to its own
 * cap), into a caller-owned vector, so a step's latency decomposes into where its time went. */
#ifndef ODSIM_SIM_SIM_H
#define ODSIM_SIM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int64_t sim_ps_t;
#define SIM_PS_PER_S   1000000000000LL
#define SIM_PS_PER_US  1000000LL
#define SIM_TIME_NEVER INT64_MAX
/* The longest time sim_ps_t holds, in seconds: INT64_MAX ps = 9.22e6 s (106.7 days). Simulated
 * durations are declared below it (run.duration_s), so a time beyond it is after every run's end. */
#define SIM_MAX_S 9223372.036854775807
/* Work left below which a flow counts as done (one byte, or one FLOP). */
#define SIM_WORK_EPSILON 1.0

typedef struct sim sim_t;
typedef struct sim_flow sim_flow_t;
typedef int32_t sim_res_t;   /* resource id, dense from 0 in creation order */
typedef int32_t sim_pool_t;  /* memory pool id, dense from 0 */

/* Creates an empty simulator at time 0. Errors: ERR_NOMEM. */
int sim_new(sim_t **out, err_t *e);
/* Frees the simulator, its pending events and flows (their callbacks are not called). NULL is ok. */
void sim_free(sim_t *sim);
/* Current simulated time. */
sim_ps_t sim_now(const sim_t *sim);

/* ---- time --------------------------------------------------------------------------------- */

typedef enum { SIM_ROUND_UP, SIM_ROUND_DOWN } sim_round_t;

/* The one conversion from seconds to engine time: *out = s·1e12 ps rounded as r. Returns false, *out
 * untouched, when s is NaN or the result lies outside what sim_ps_t holds. */
bool sim_ps_of_s(double s, sim_round_t r, sim_ps_t *out);
/* s seconds rounded up for a time inside the engine; SIM_TIME_NEVER when the clock cannot hold it
 * (or s is NaN): "after every run's end" is then the exact meaning. */
sim_ps_t sim_ps_or_never(double s);
/* t + dt for t, dt ≥ 0; SIM_TIME_NEVER when either is SIM_TIME_NEVER or the sum overflows. */
sim_ps_t sim_ps_add(sim_ps_t t, sim_ps_t dt);

/* ---- events ------------------------------------------------------------------------------- */

typedef void (*sim_event_fn)(sim_t *sim, void *arg);

/* Schedules fn(sim, arg) at absolute time t ≥ now. Events at equal times run in the order they were
 * scheduled. Errors: ERR_INVAL (t < now or fn NULL), ERR_NOMEM. */
int sim_at(sim_t *sim, sim_ps_t t, sim_event_fn fn, void *arg, err_t *e);

/* Runs events until none is left, time would pass `until`, sim_stop is called, or a callback reported
 * an error with sim_fail (returned here). Time ends at min(until, last event). */
int sim_run(sim_t *sim, sim_ps_t until, err_t *e);
/* Makes sim_run return after the current event. */
void sim_stop(sim_t *sim);
/* Records an error from inside a callback; sim_run stops and returns it. The first error wins. */
void sim_fail(sim_t *sim, const err_t *error);
/* Number of events processed so far (for benchmarks and progress). */
uint64_t sim_events(const sim_t *sim);

/* ---- fluid resources ---------------------------------------------------------------------- */

/* Adds a constraint named `name` (unique; e.g. "gpu0.h2d") with `capacity` units per second
 * (> 0, finite) and a unit label ("B/s", "FLOP/s", "share") for reports. Errors: ERR_INVAL (bad
 * capacity, empty or duplicate name), ERR_NOMEM. */
int sim_res_add(sim_t *sim, const char *name, double capacity, const char *unit, sim_res_t *out,
                err_t *e);
/* Id of the resource called name, or -1. */
sim_res_t sim_res_find(const sim_t *sim, const char *name);
size_t sim_res_count(const sim_t *sim);
const char *sim_res_name(const sim_t *sim, sim_res_t r);
const char *sim_res_unit(const sim_t *sim, sim_res_t r);
double sim_res_capacity(const sim_t *sim, sim_res_t r);
/* Changes a capacity from now on (time slices, a what-if); re-solves the flows crossing it.
 * Errors: ERR_INVAL (unknown r, capacity ≤ 0 or not finite). */
int sim_res_set_capacity(sim_t *sim, sim_res_t r, double capacity, err_t *e);
/* Time-weighted mean utilisation of r (used / capacity) over [0, now]; and the units it carried. */
double sim_res_utilisation(const sim_t *sim, sim_res_t r);
double sim_res_work(const sim_t *sim, sim_res_t r);

/* A flow's request. Each unit of the flow's work consumes coef[i] units of res[i] (bytes of a copy
 * cross host DRAM, the link and HBM with coef 1 each). */
typedef struct sim_flow_spec {
    double work;             /* units to move, ≥ 0 (0 completes after `latency_ps`) */
    double cap_rate;         /* own rate cap, units/s; 0 = none */
    double weight;           /* max-min weight, > 0 (1 = plain max-min) */
    sim_ps_t latency_ps;     /* fixed delay before the flow starts moving work */
    size_t n_uses;           /* ≥ 1 unless cap_rate > 0 (a pure-delay or self-paced flow) */
    const sim_res_t *res;    /* n_uses resource ids, distinct */
    const double *coef;      /* n_uses coefficients, > 0 */
    double *charge_ps;       /* optional caller-owned vector of sim_res_count()+1 entries: lost time
                              * per binding resource, the last entry for the flow's own cap */
    void (*done)(sim_t *sim, void *arg, sim_flow_t *flow); /* called once at completion */
    void *arg;
} sim_flow_spec_t;

/* Starts a flow now. The spec's arrays are copied. On success the flow is owned by the engine until
 * its done callback returns (the handle is invalid afterwards). Errors: ERR_INVAL (negative or
 * non-finite work, weight ≤ 0, unknown or repeated resource, coef ≤ 0, no resource and no cap),
 * ERR_NOMEM. */
int sim_flow_start(sim_t *sim, const sim_flow_spec_t *spec, sim_flow_t **out, err_t *e);
/* Current rate (units/s), remaining work, and standalone rate of a running flow. */
double sim_flow_rate(const sim_flow_t *f);
double sim_flow_remaining(const sim_flow_t *f);
double sim_flow_standalone_rate(const sim_flow_t *f);
sim_ps_t sim_flow_start_time(const sim_flow_t *f);

/* ---- memory pools (HBM, host DRAM): capacity enforced ------------------------------------- */

/* Adds a pool of `capacity_bytes` (> 0). Errors: ERR_INVAL, ERR_NOMEM. */
int sim_pool_add(sim_t *sim, const char *name, double capacity_bytes, sim_pool_t *out, err_t *e);
sim_pool_t sim_pool_find(const sim_t *sim, const char *name);
/* Takes bytes from a pool. Errors: ERR_CAPACITY (with the pool's name, capacity, in use and asked),
 * ERR_INVAL (negative bytes, unknown pool). Nothing is taken on error. */
int sim_pool_alloc(sim_t *sim, sim_pool_t p, double bytes, err_t *e);
/* Returns bytes to a pool (never below zero). */
void sim_pool_release(sim_t *sim, sim_pool_t p, double bytes);
double sim_pool_used(const sim_t *sim, sim_pool_t p);
double sim_pool_peak(const sim_t *sim, sim_pool_t p);
double sim_pool_capacity(const sim_t *sim, sim_pool_t p);
size_t sim_pool_count(const sim_t *sim);
const char *sim_pool_name(const sim_t *sim, sim_pool_t p);

#ifdef __cplusplus
}
#endif
#endif
