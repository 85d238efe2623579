/* fluid — weighted max-min sharing of capacity constraints with per-flow rate caps (SimGrid's lmm).
 *
 * A flow crosses constraints j, consuming coef_j units of each per unit of its progress. Rates follow
 * progressive filling: every unfixed flow i runs at w_i·λ as λ grows; a constraint saturates at
 * λ_j = (C_j − fixed usage)/Σ_unfixed coef·w and fixes its unfixed flows; a flow reaching its cap c_i
 * (at λ = c_i/w_i) is fixed at c_i. Rates are re-solved only when a flow starts or ends or a capacity
 * changes, and only over the component of constraints the change touches (fluid_comp.c). Components
 * are a union-find over member constraints, merged when a flow joins two and split again only when
 * their last flow leaves. A constraint that does not bind couples nothing: it stays passive, outside
 * every component, each component counting its own usage there, and is merged (with every component
 * crossing it) only when their usages sum to its capacity. So host DRAM at a third of its bandwidth
 * leaves each GPU its own component. A component may still be a superset of the connected one
 * (solving independent parts together gives the same rates, at some cost), but no graph search runs
 * per event. Levels tie to the lowest constraint id, so results do not depend on how components
 * formed: a passive constraint changes no rate, remaining work or completion, bit for bit.
 *
 * A solve starts from per-constraint sums kept as flows come and go, meets caps in sorted order, and
 * fixes flows one by one only below the last level; at the last level, where one constraint binds all
 * flows still unfixed, it touches only the flows that change group. With flows in series (every flow
 * crossing the same constraints) an event costs O(constraints + capped flows + flows changing group).
 * Applying a solve touches only the groups whose rate or flows changed and the usage integrals whose
 * value changed; the earliest completion comes from a heap of groups, not a scan of the constraints.
 *
 * Completions without rescheduling every flow: the flows a solve fixes at constraint b (its bottleneck)
 * all run at w_i·λ_b, so they share a virtual clock V_b advancing at λ_b; flow i finishes when V_b
 * reaches its key V_enter + remaining/w_i. Each group keeps its flows in a heap by key and exposes only
 * its earliest finish; a solve that changes λ_b touches the group, not its flows. Capped flows form one
 * more group whose clock is real time (seconds) and whose per-flow "weight" is the cap. A flow's
 * remaining work is materialised only when it changes group.
 *
 * Accounting: standalone rate s_i = min(cap, min_j C_j/coef_j) at the start. While in group g, flow i
 * loses dt·(1 − rate/s_i) per epoch, which sums over a stretch to Δt − gw_i·ΔV_g/s_i: it is charged,
 * in picoseconds, to charge_ps[g] (g = the bottleneck constraint, or cap_slot for the cap) when the
 * flow leaves the group or finishes; in the cap group, as Δt·(1 − cap/s_i) from the integer times.
 *
 * Times are integer picoseconds; a completion is rounded up to the next picosecond and a flow with under
 * SIM_WORK_EPSILON left is done. Ownership: the fluid owns its flows; ids are dense small integers
 * reused after fluid_flow_release. After an ERR_NOMEM from any call the fluid may only be freed. */
#ifndef ODSIM_SIM_FLUID_H
#define ODSIM_SIM_FLUID_H

#include <stddef.h>
#include <stdint.h>

typedef struct fluid fluid_t;

typedef struct fluid_flow_req {
    double work;            /* ≥ SIM_WORK_EPSILON (smaller work is done before it starts) */
    double weight;          /* > 0 */
    double cap_rate;        /* > 0, or 0 for none */
    size_t n_uses;          /* ≥ 1, or 0 with cap_rate > 0 */
    const int32_t *res;     /* n_uses distinct constraint ids */
    const double *coef;     /* n_uses values > 0 */
    double *charge_ps;      /* NULL, or lost time per constraint, cap_slot for the cap */
    size_t cap_slot;
    void *user;             /* returned by fluid_flow_user */
} fluid_flow_req_t;

/* Creates an empty fluid; NULL when out of memory. */
fluid_t *fluid_new(void);
/* Frees the fluid and all its flows. NULL is ok. */
void fluid_free(fluid_t *fl);

/* Adds a constraint with capacity > 0 (finite; the caller checks) units/s; its id is the number of
 * constraints before it. Returns 0 or ERR_NOMEM. */
int fluid_res_add(fluid_t *fl, double capacity, int32_t *out);
/* Sets constraint r's capacity from now_ps on and re-solves its component. Returns 0 or ERR_NOMEM. */
int fluid_res_set_capacity(fluid_t *fl, int32_t r, double capacity, int64_t now_ps);
double fluid_res_capacity(const fluid_t *fl, int32_t r);
/* Current usage Σ coef·rate of r (units/s). */
double fluid_res_used(const fluid_t *fl, int32_t r);
/* ∫ used/capacity dt and ∫ used dt over [0, now_ps], in ps and in units·ps. */
double fluid_res_busy_ps(const fluid_t *fl, int32_t r, int64_t now_ps);
double fluid_res_work_ps(const fluid_t *fl, int32_t r, int64_t now_ps);

/* Starts a flow at now_ps (≥ every earlier call's time); the request's arrays are copied, its
 * preconditions are the caller's to check. Returns 0 (id in *out) or ERR_NOMEM. */
int fluid_flow_add(fluid_t *fl, int64_t now_ps, const fluid_flow_req_t *req, int32_t *out);
/* Removes a running flow before it completes (it is not reported done), charging its lost time, and
 * re-solves; the id is free afterwards. Returns 0 or ERR_NOMEM. */
int fluid_flow_remove(fluid_t *fl, int32_t id, int64_t now_ps);

/* Time of the earliest completion (rounded up to the picosecond), SIM_TIME_NEVER when none. */
int64_t fluid_next_ps(fluid_t *fl);
/* Takes out every flow done at now_ps (remaining < SIM_WORK_EPSILON, or its rounded completion time
 * reached) and re-solves once. *ids (owned by the fluid, valid until the next call) lists them in start
 * order; they stay readable (rate 0, remaining 0) until fluid_flow_release. Returns 0 or ERR_NOMEM. */
int fluid_collect_done(fluid_t *fl, int64_t now_ps, const int32_t **ids, size_t *n);
/* Frees the id of a done flow for reuse. */
void fluid_flow_release(fluid_t *fl, int32_t id);

/* A running flow's current rate and remaining work at now_ps; 0 for a done flow. */
double fluid_flow_rate(const fluid_t *fl, int32_t id);
double fluid_flow_remaining(const fluid_t *fl, int32_t id, int64_t now_ps);
double fluid_flow_standalone(const fluid_t *fl, int32_t id);
/* The bottleneck constraint of a running flow, or -1 when its cap binds. */
int32_t fluid_flow_bottleneck(const fluid_t *fl, int32_t id);
void *fluid_flow_user(const fluid_t *fl, int32_t id);

#endif
