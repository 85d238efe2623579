/* sim — the engine's context on top of evq (events) and fluid (resource sharing).
 *
 * The fluid's next completion is a virtual event merged into the queue by the run loop rather than an
 * entry in it: re-arming it after every start or finish would leave a stale entry in the heap each time.
 * At equal times the completions run before the queued events (a fixed rule, so runs stay
 * deterministic). Done callbacks run after the fluid has taken every flow done at that instant out and
 * re-solved, so a callback may start flows, schedule events or change capacities. */
#include "sim/sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/evq.h"
#include "sim/fluid.h"

enum { FLOW_WAITING, FLOW_MOVING, FLOW_FINISHED };

struct sim_flow {
    sim_t *sim;
    int state;
    int32_t fid;           /* fluid id while moving */
    sim_ps_t start_ps;
    double work, weight, cap_rate;
    size_t n_uses;
    sim_res_t *res;        /* copies, kept while waiting out the latency */
    double *coef;
    double *charge_ps;
    size_t cap_slot;
    void (*done)(sim_t *sim, void *arg, sim_flow_t *flow);
    void *arg;
    sim_flow_t *next_free;
};

typedef struct named {
    char *name, *unit;
} named_t;

typedef struct pool {
    char *name;
    double capacity, used, peak;
} pool_t;

struct sim {
    sim_ps_t now_ps;
    evq_t *q;
    fluid_t *fl;
    uint64_t n_events;
    int stopped;
    err_t fail;            /* first error from a callback, code 0 when none */
    named_t *res;
    size_t nres, capres;
    pool_t *pools;
    size_t npools, cappools;
    sim_flow_t **flows;    /* every flow record allocated, for sim_free */
    size_t nflows, capflows;
    sim_flow_t *free_flows;
    int32_t *done_ids;     /* copy of the fluid's done list: callbacks may grow the fluid */
    size_t capdone;
};

int sim_new(sim_t **out, err_t *e)
{
    sim_t *s = calloc(1, sizeof *s);
    if (!s || !(s->q = evq_new()) || !(s->fl = fluid_new())) {
        sim_free(s);
        return err_set(e, ERR_NOMEM, "sim_new: out of memory");
    }
    *out = s;
    return 0;
}

void sim_free(sim_t *sim)
{
    if (!sim) return;
    evq_free(sim->q);
    fluid_free(sim->fl);
    for (size_t i = 0; i < sim->nres; i++) {
        free(sim->res[i].name);
        free(sim->res[i].unit);
    }
    for (size_t i = 0; i < sim->npools; i++) free(sim->pools[i].name);
    for (size_t i = 0; i < sim->nflows; i++) {
        free(sim->flows[i]->res);
        free(sim->flows[i]->coef);
        free(sim->flows[i]);
    }
    free(sim->res);
    free(sim->pools);
    free(sim->flows);
    free(sim->done_ids);
    free(sim);
}

bool sim_ps_of_s(double s, sim_round_t r, sim_ps_t *out)
{
    double ps = s * (double)SIM_PS_PER_S;
    ps = r == SIM_ROUND_UP ? ceil(ps) : floor(ps);
    /* ±2^63 are exact doubles; every whole double in [-2^63, 2^63) converts exactly (NaN fails) */
    if (!(ps >= -9223372036854775808.0 && ps < 9223372036854775808.0)) return false;
    *out = (sim_ps_t)ps;
    return true;
}

sim_ps_t sim_ps_or_never(double s)
{
    sim_ps_t t;
    return sim_ps_of_s(s, SIM_ROUND_UP, &t) ? t : SIM_TIME_NEVER;
}

sim_ps_t sim_ps_add(sim_ps_t t, sim_ps_t dt) { return dt > SIM_TIME_NEVER - t ? SIM_TIME_NEVER : t + dt; }

sim_ps_t sim_now(const sim_t *sim) { return sim->now_ps; }
uint64_t sim_events(const sim_t *sim) { return sim->n_events; }

/* Grows *p (of *cap elements of size) to hold at least n; 0 or ERR_NOMEM. */
static int reserve(void **p, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap) return 0;
    size_t c = *cap ? *cap : 8;
    while (c < n) c *= 2;
    void *np = realloc(*p, c * size);
    if (!np) return ERR_NOMEM;
    *p = np;
    *cap = c;
    return 0;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---- events -------------------------------------------------------------------------------- */

static int push(sim_t *sim, sim_ps_t t, sim_event_fn fn, void *arg, err_t *e)
{
    if (evq_push(sim->q, t, (evq_fn)fn, arg)) return err_set(e, ERR_NOMEM, "sim: event queue out of memory");
    return 0;
}

int sim_at(sim_t *sim, sim_ps_t t, sim_event_fn fn, void *arg, err_t *e)
{
    if (!fn) return err_set(e, ERR_INVAL, "sim_at: NULL callback");
    if (t < sim->now_ps)
        return err_set(e, ERR_INVAL, "sim_at: time %lld ps is before now (%lld ps)", (long long)t,
                       (long long)sim->now_ps);
    return push(sim, t, fn, arg, e);
}

void sim_stop(sim_t *sim) { sim->stopped = 1; }

void sim_fail(sim_t *sim, const err_t *error)
{
    if (sim->fail.code) return;
    if (error && error->code) {
        sim->fail = *error;
    } else {
        err_set(&sim->fail, ERR_INVAL, "sim_fail called without an error");
    }
}

static void fluid_fire(sim_t *sim);

int sim_run(sim_t *sim, sim_ps_t until, err_t *e)
{
    sim->stopped = 0;
    while (!sim->stopped && !sim->fail.code) {
        sim_ps_t tq = evq_peek_ps(sim->q), tf = fluid_next_ps(sim->fl);
        if (tf < sim->now_ps) tf = sim->now_ps;  /* never backwards, whatever the rounding */
        if (tf == SIM_TIME_NEVER && !evq_size(sim->q)) break;
        sim_ps_t t = tf <= tq ? tf : tq;
        if (t > until) {
            if (until > sim->now_ps) sim->now_ps = until;
            break;
        }
        sim->n_events++;
        if (tf <= tq) {
            sim->now_ps = tf;
            fluid_fire(sim);
            continue;
        }
        evq_entry_t ev;
        evq_pop(sim->q, &ev);
        sim->now_ps = ev.t_ps;
        ((sim_event_fn)ev.fn)(sim, ev.arg);
    }
    if (sim->fail.code) {
        if (e) *e = sim->fail;
        return sim->fail.code;
    }
    return 0;
}

static void fail_code(sim_t *sim, int code, const char *what)
{
    err_t err;
    err_set(&err, code, "sim: %s: out of memory", what);
    sim_fail(sim, &err);
}

static void flow_recycle(sim_t *sim, sim_flow_t *f)
{
    free(f->res);
    free(f->coef);
    f->res = NULL;
    f->coef = NULL;
    f->next_free = sim->free_flows;
    sim->free_flows = f;
}

static void flow_finish(sim_t *sim, sim_flow_t *f)
{
    f->state = FLOW_FINISHED;
    if (f->done) f->done(sim, f->arg, f);
}

/* Completes every flow done now, then runs their callbacks in start order. */
static void fluid_fire(sim_t *sim)
{
    const int32_t *ids;
    size_t n;
    int rc = fluid_collect_done(sim->fl, sim->now_ps, &ids, &n);
    if (!rc) rc = reserve((void **)&sim->done_ids, &sim->capdone, n, sizeof *sim->done_ids);
    if (rc) {
        fail_code(sim, rc, "fluid");
        return;
    }
    memcpy(sim->done_ids, ids, n * sizeof *ids);
    for (size_t i = 0; i < n; i++) {
        int32_t fid = sim->done_ids[i];
        sim_flow_t *f = fluid_flow_user(sim->fl, fid);
        flow_finish(sim, f);
        fluid_flow_release(sim->fl, fid);
        flow_recycle(sim, f);
    }
}

/* ---- fluid resources ----------------------------------------------------------------------- */

static int bad_res(const sim_t *sim, sim_res_t r) { return r < 0 || (size_t)r >= sim->nres; }

int sim_res_add(sim_t *sim, const char *name, double capacity, const char *unit, sim_res_t *out, err_t *e)
{
    if (!name || !*name) return err_set(e, ERR_INVAL, "sim_res_add: empty name");
    if (!(capacity > 0) || !isfinite(capacity))
        return err_set(e, ERR_INVAL, "sim_res_add: %s: capacity %g must be > 0 and finite", name, capacity);
    if (sim_res_find(sim, name) >= 0) return err_set(e, ERR_INVAL, "sim_res_add: duplicate resource %s", name);
    if (reserve((void **)&sim->res, &sim->capres, sim->nres + 1, sizeof *sim->res))
        return err_set(e, ERR_NOMEM, "sim_res_add: out of memory");
    named_t nm = {dup_str(name), dup_str(unit ? unit : "")};
    int32_t id;
    if (!nm.name || !nm.unit || fluid_res_add(sim->fl, capacity, &id)) {
        free(nm.name);
        free(nm.unit);
        return err_set(e, ERR_NOMEM, "sim_res_add: out of memory");
    }
    sim->res[sim->nres++] = nm;
    if (out) *out = id;
    return 0;
}

sim_res_t sim_res_find(const sim_t *sim, const char *name)
{
    for (size_t i = 0; i < sim->nres; i++)
        if (!strcmp(sim->res[i].name, name)) return (sim_res_t)i;
    return -1;
}

size_t sim_res_count(const sim_t *sim) { return sim->nres; }
const char *sim_res_name(const sim_t *sim, sim_res_t r) { return bad_res(sim, r) ? NULL : sim->res[r].name; }
const char *sim_res_unit(const sim_t *sim, sim_res_t r) { return bad_res(sim, r) ? NULL : sim->res[r].unit; }

double sim_res_capacity(const sim_t *sim, sim_res_t r)
{
    return bad_res(sim, r) ? 0 : fluid_res_capacity(sim->fl, r);
}

int sim_res_set_capacity(sim_t *sim, sim_res_t r, double capacity, err_t *e)
{
    if (bad_res(sim, r)) return err_set(e, ERR_INVAL, "sim_res_set_capacity: unknown resource %d", (int)r);
    if (!(capacity > 0) || !isfinite(capacity))
        return err_set(e, ERR_INVAL, "sim_res_set_capacity: %s: capacity %g must be > 0 and finite",
                       sim->res[r].name, capacity);
    if (fluid_res_set_capacity(sim->fl, r, capacity, sim->now_ps))
        return err_set(e, ERR_NOMEM, "sim_res_set_capacity: out of memory");
    return 0;
}

double sim_res_utilisation(const sim_t *sim, sim_res_t r)
{
    if (bad_res(sim, r) || sim->now_ps <= 0) return 0;
    return fluid_res_busy_ps(sim->fl, r, sim->now_ps) / (double)sim->now_ps;
}

double sim_res_work(const sim_t *sim, sim_res_t r)
{
    return bad_res(sim, r) ? 0 : fluid_res_work_ps(sim->fl, r, sim->now_ps) / (double)SIM_PS_PER_S;
}

/* ---- flows --------------------------------------------------------------------------------- */

static int check_spec(const sim_t *sim, const sim_flow_spec_t *s, err_t *e)
{
    if (!s) return err_set(e, ERR_INVAL, "sim_flow_start: NULL spec");
    if (!(s->work >= 0) || !isfinite(s->work))
        return err_set(e, ERR_INVAL, "sim_flow_start: work %g must be finite and >= 0", s->work);
    if (!(s->weight > 0) || !isfinite(s->weight))
        return err_set(e, ERR_INVAL, "sim_flow_start: weight %g must be > 0 and finite", s->weight);
    if (!(s->cap_rate >= 0) || !isfinite(s->cap_rate))
        return err_set(e, ERR_INVAL, "sim_flow_start: cap_rate %g must be finite and >= 0", s->cap_rate);
    if (s->latency_ps < 0 || s->latency_ps > SIM_TIME_NEVER - sim->now_ps)
        return err_set(e, ERR_INVAL, "sim_flow_start: latency %lld ps out of range", (long long)s->latency_ps);
    if (!s->n_uses && !(s->cap_rate > 0))
        return err_set(e, ERR_INVAL, "sim_flow_start: a flow needs a resource or a rate cap");
    if (s->n_uses && (!s->res || !s->coef))
        return err_set(e, ERR_INVAL, "sim_flow_start: NULL resource or coefficient array");
    if (s->n_uses > sim->nres)
        return err_set(e, ERR_INVAL, "sim_flow_start: %zu uses but only %zu resources", s->n_uses, sim->nres);
    for (size_t i = 0; i < s->n_uses; i++) {
        if (bad_res(sim, s->res[i])) return err_set(e, ERR_INVAL, "sim_flow_start: unknown resource %d", (int)s->res[i]);
        if (!(s->coef[i] > 0) || !isfinite(s->coef[i]))
            return err_set(e, ERR_INVAL, "sim_flow_start: %s: coefficient %g must be > 0 and finite",
                           sim->res[s->res[i]].name, s->coef[i]);
        for (size_t j = 0; j < i; j++)
            if (s->res[j] == s->res[i])
                return err_set(e, ERR_INVAL, "sim_flow_start: resource %s used twice", sim->res[s->res[i]].name);
    }
    return 0;
}

/* Hands a flow to the fluid, now. */
static int flow_move(sim_t *sim, sim_flow_t *f, const sim_res_t *res, const double *coef, err_t *e)
{
    fluid_flow_req_t req = {f->work, f->weight, f->cap_rate, f->n_uses, res, coef, f->charge_ps, f->cap_slot, f};
    if (fluid_flow_add(sim->fl, sim->now_ps, &req, &f->fid))
        return err_set(e, ERR_NOMEM, "sim_flow_start: out of memory");
    f->state = FLOW_MOVING;
    return 0;
}

/* The end of a flow's latency (or the instant after the start of an empty one). */
static void flow_begin(sim_t *sim, void *arg)
{
    sim_flow_t *f = arg;
    if (f->work < SIM_WORK_EPSILON) {
        flow_finish(sim, f);
        flow_recycle(sim, f);
        return;
    }
    err_t err;
    if (flow_move(sim, f, f->res, f->coef, &err)) sim_fail(sim, &err);
}

int sim_flow_start(sim_t *sim, const sim_flow_spec_t *spec, sim_flow_t **out, err_t *e)
{
    int rc = check_spec(sim, spec, e);
    if (rc) return rc;
    sim_flow_t *f = sim->free_flows;
    if (f) {
        sim->free_flows = f->next_free;
    } else {
        if (reserve((void **)&sim->flows, &sim->capflows, sim->nflows + 1, sizeof *sim->flows) ||
            !(f = calloc(1, sizeof *f)))
            return err_set(e, ERR_NOMEM, "sim_flow_start: out of memory");
        sim->flows[sim->nflows++] = f;
    }
    *f = (sim_flow_t){.sim = sim, .state = FLOW_WAITING, .fid = -1, .start_ps = sim->now_ps,
                      .work = spec->work, .weight = spec->weight, .cap_rate = spec->cap_rate,
                      .n_uses = spec->n_uses, .charge_ps = spec->charge_ps, .cap_slot = sim->nres,
                      .done = spec->done, .arg = spec->arg};
    if (spec->latency_ps == 0 && spec->work >= SIM_WORK_EPSILON) {
        rc = flow_move(sim, f, spec->res, spec->coef, e);
    } else {
        /* Keep copies of the arrays until the flow starts moving; done is never called from here. */
        if (f->n_uses && (!(f->res = malloc(f->n_uses * sizeof *f->res)) ||
                          !(f->coef = malloc(f->n_uses * sizeof *f->coef)))) {
            rc = err_set(e, ERR_NOMEM, "sim_flow_start: out of memory");
        } else {
            if (f->n_uses) {
                memcpy(f->res, spec->res, f->n_uses * sizeof *f->res);
                memcpy(f->coef, spec->coef, f->n_uses * sizeof *f->coef);
            }
            rc = push(sim, sim->now_ps + spec->latency_ps, flow_begin, f, e);
        }
    }
    if (rc && f->state == FLOW_WAITING) {
        flow_recycle(sim, f);
        return rc;
    }
    if (out) *out = f;
    return rc;
}

double sim_flow_rate(const sim_flow_t *f)
{
    return f->state == FLOW_MOVING ? fluid_flow_rate(f->sim->fl, f->fid) : 0;
}

double sim_flow_remaining(const sim_flow_t *f)
{
    if (f->state == FLOW_MOVING) return fluid_flow_remaining(f->sim->fl, f->fid, f->sim->now_ps);
    return f->state == FLOW_WAITING ? f->work : 0;
}

double sim_flow_standalone_rate(const sim_flow_t *f)
{
    if (f->state == FLOW_MOVING || (f->state == FLOW_FINISHED && f->fid >= 0))
        return fluid_flow_standalone(f->sim->fl, f->fid);
    /* Not moving yet (or an empty flow): from the current capacities. */
    double s = f->cap_rate > 0 ? f->cap_rate : INFINITY;
    for (size_t i = 0; i < f->n_uses && f->res; i++) {
        double r = fluid_res_capacity(f->sim->fl, f->res[i]) / f->coef[i];
        if (r < s) s = r;
    }
    return s;
}

sim_ps_t sim_flow_start_time(const sim_flow_t *f) { return f->start_ps; }

/* ---- memory pools -------------------------------------------------------------------------- */

static int bad_pool(const sim_t *sim, sim_pool_t p) { return p < 0 || (size_t)p >= sim->npools; }

int sim_pool_add(sim_t *sim, const char *name, double capacity_bytes, sim_pool_t *out, err_t *e)
{
    if (!name || !*name) return err_set(e, ERR_INVAL, "sim_pool_add: empty name");
    if (!(capacity_bytes > 0) || !isfinite(capacity_bytes))
        return err_set(e, ERR_INVAL, "sim_pool_add: %s: capacity %g must be > 0 and finite", name, capacity_bytes);
    if (sim_pool_find(sim, name) >= 0) return err_set(e, ERR_INVAL, "sim_pool_add: duplicate pool %s", name);
    char *nm = dup_str(name);
    if (!nm || reserve((void **)&sim->pools, &sim->cappools, sim->npools + 1, sizeof *sim->pools)) {
        free(nm);
        return err_set(e, ERR_NOMEM, "sim_pool_add: out of memory");
    }
    sim->pools[sim->npools] = (pool_t){nm, capacity_bytes, 0, 0};
    if (out) *out = (sim_pool_t)sim->npools;
    sim->npools++;
    return 0;
}

sim_pool_t sim_pool_find(const sim_t *sim, const char *name)
{
    for (size_t i = 0; i < sim->npools; i++)
        if (!strcmp(sim->pools[i].name, name)) return (sim_pool_t)i;
    return -1;
}

int sim_pool_alloc(sim_t *sim, sim_pool_t p, double bytes, err_t *e)
{
    if (bad_pool(sim, p)) return err_set(e, ERR_INVAL, "sim_pool_alloc: unknown pool %d", (int)p);
    pool_t *P = &sim->pools[p];
    if (!(bytes >= 0) || !isfinite(bytes))
        return err_set(e, ERR_INVAL, "sim_pool_alloc: %s: bytes %g must be finite and >= 0", P->name, bytes);
    if (P->used + bytes > P->capacity)
        return err_set(e, ERR_CAPACITY, "%s: capacity %.0f bytes, in use %.0f, asked %.0f (short by %.0f)",
                       P->name, P->capacity, P->used, bytes, P->used + bytes - P->capacity);
    P->used += bytes;
    if (P->used > P->peak) P->peak = P->used;
    return 0;
}

void sim_pool_release(sim_t *sim, sim_pool_t p, double bytes)
{
    if (bad_pool(sim, p) || !(bytes > 0)) return;
    pool_t *P = &sim->pools[p];
    P->used = P->used > bytes ? P->used - bytes : 0;
}

double sim_pool_used(const sim_t *sim, sim_pool_t p) { return bad_pool(sim, p) ? 0 : sim->pools[p].used; }
double sim_pool_peak(const sim_t *sim, sim_pool_t p) { return bad_pool(sim, p) ? 0 : sim->pools[p].peak; }
double sim_pool_capacity(const sim_t *sim, sim_pool_t p) { return bad_pool(sim, p) ? 0 : sim->pools[p].capacity; }
size_t sim_pool_count(const sim_t *sim) { return sim->npools; }
const char *sim_pool_name(const sim_t *sim, sim_pool_t p) { return bad_pool(sim, p) ? NULL : sim->pools[p].name; }
