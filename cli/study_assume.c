/* study_assume — assumed parameters that move a plan's time, by re-planning (cli/study_assume.h). */
#include "cli/study_assume.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/study_int.h"
#include "common/str.h"
#include "models/hwinst.h"
#include "models/provider.h"

#define STEP_REL 0.10  /* the change asked of each parameter */
#define MOVES_REL 0.005 /* what counts as moving the result */

/* Capacities enter through the engine's resources (models/hwinst.h), never through a cost form's
 * note: an assumed one is tried whether or not a plan noted it. */
static const char *const capacities[] = {"h2d_GBps", "d2h_GBps", "duplex_GBps", "hbm_GBps", "bf16_TFLOPS",
                                         "fp8_TFLOPS", "host_dram_GBps", "cxl_read_GBps", "cxl_write_GBps"};

/* The plan of req on a fresh engine built from cal: its standalone time. The point's method is
 * shared (its planner's statistics are drawn once, when it is made: every plan sees the same). */
static int plan_ps(const study_point_t *pt, calib_t *cal, const plan_request_t *req, sim_ps_t *out, err_t *e)
{
    sim_t *sim = NULL;
    provider_t *prov = NULL;
    plan_t plan;
    plan_init(&plan);
    double handoff_us = 0;
    int rc = sim_new(&sim, e);
    if (!rc) rc = hwinst_build(&pt->hw, cal, sim, e);
    if (!rc) rc = provider_new_shared(pt->method, &pt->hw, cal, &prov, e);
    if (!rc) rc = provider_build(prov, sim, 0, req, &plan, e);
    if (!rc) rc = calib_get(cal, "ce_handoff_us", &handoff_us, e);
    if (!rc) rc = plan_standalone_ps(&plan, sim, cost_ps(handoff_us * 1e-6), out, e);
    plan_free(&plan);
    provider_free(prov);
    sim_free(sim);
    return rc;
}

/* The time with parameter `name` scaled by f (restored after). */
static int scaled_ps(const study_point_t *pt, calib_t *cal, const plan_request_t *req,
                     const char *name, double f, sim_ps_t *out, err_t *e)
{
    const calib_param_t *p = calib_find(cal, name);
    calib_param_t keep = *p;
    char *origin = str_dup(p->origin), *nm = str_dup(p->name);
    if (!origin || !nm) {
        free(origin);
        free(nm);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    keep.origin = origin;
    keep.name = nm;
    calib_param_t scaled = keep;
    scaled.value = keep.value * f;
    int rc = calib_set(cal, &scaled, e);
    if (!rc) rc = plan_ps(pt, cal, req, out, e);
    int rc2 = calib_set(cal, &keep, e);
    free(origin);
    free(nm);
    return rc ? rc : rc2;
}

static bool is_candidate(const calib_t *cal, const char *name)
{
    const calib_param_t *p = calib_find(cal, name);
    return p && !strncmp(p->origin, "assumed", 7) && p->value != 0;
}

static int add(study_assumptions_t *a, const calib_param_t *p, double elasticity, double lo, double hi, err_t *e)
{
    study_assumption_t *nv = realloc(a->v, (a->n + 1) * sizeof *nv);
    if (!nv) return err_set(e, ERR_NOMEM, "out of memory");
    a->v = nv;
    study_assumption_t *x = &a->v[a->n];
    *x = (study_assumption_t){str_dup(p->name), str_dup(p->origin), p->value, elasticity, lo, hi};
    if (!x->name || !x->origin) {
        free(x->name);
        free(x->origin);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    a->n++;
    return ERR_OK;
}

/* Tries candidate `name` once (names may come from both lists). */
static int try_one(study_assumptions_t *a, const study_point_t *pt, calib_t *cal,
                   const plan_request_t *req, const char *name, double t0, err_t *e)
{
    for (size_t i = 0; i < a->n; i++)
        if (!strcmp(a->v[i].name, name)) return ERR_OK;
    sim_ps_t lo_ps = 0, hi_ps = 0;
    int rc = scaled_ps(pt, cal, req, name, 1 - STEP_REL, &lo_ps, e);
    if (!rc) rc = scaled_ps(pt, cal, req, name, 1 + STEP_REL, &hi_ps, e);
    if (rc) return rc;
    double lo = (double)lo_ps / t0 - 1, hi = (double)hi_ps / t0 - 1;
    if (!(fabs(lo) > MOVES_REL || fabs(hi) > MOVES_REL)) return ERR_OK;
    return add(a, calib_find(cal, name), (hi - lo) / (2 * STEP_REL), lo, hi, e);
}

int study_assumptions_of(study_t *s, size_t i, const plan_request_t *req, study_assumptions_t *out, err_t *e)
{
    memset(out, 0, sizeof *out);
    out->context_tokens = req->context_tokens;
    out->new_tokens = req->new_tokens;
    study_point_t pt;
    calib_t *cal = NULL;
    int rc = study_point_resolve(s, i, &pt, e);
    if (rc) return rc;
    rc = study_calib_load(s, &pt, &cal, e);
    sim_ps_t t0 = 0;
    if (!rc) {
        calib_notes_reset(cal);
        rc = plan_ps(&pt, cal, req, &t0, e);
    }
    out->time_us = (double)t0 / 1e6;
    /* the assumed parameters this plan's cost forms used, then the assumed capacities */
    size_t nf = rc ? 0 : calib_flag_count(cal);
    char **names = calloc(nf + 1, sizeof *names);
    if (!names) rc = err_set(e, ERR_NOMEM, "out of memory");
    calib_flag_t f;
    for (size_t k = 0; !rc && k < nf && calib_flag_at(cal, k, &f); k++)
        if (f.assumed && !(names[k] = str_dup(f.name))) rc = err_set(e, ERR_NOMEM, "out of memory");
    for (size_t k = 0; !rc && t0 > 0 && k < nf; k++)
        if (names[k] && is_candidate(cal, names[k])) rc = try_one(out, &pt, cal, req, names[k], (double)t0, e);
    for (size_t k = 0; !rc && t0 > 0 && k < sizeof capacities / sizeof capacities[0]; k++)
        if (is_candidate(cal, capacities[k])) rc = try_one(out, &pt, cal, req, capacities[k], (double)t0, e);
    for (size_t k = 0; names && k < nf; k++) free(names[k]);
    free(names);
    calib_free(cal);
    study_point_free(&pt);
    if (rc) study_assumptions_free(out);
    return rc;
}

/* The context a run's point reaches: what its one-step plan is asked at. */
static int run_context(const study_point_t *pt, uint64_t *out, err_t *e)
{
    *out = 1048576;
    if (pt->wl.kind == SCN_WL_PROBE) {
        *out = (uint64_t)pt->probe.n_tokens;
        return ERR_OK;
    }
    const cfg_node_t *n = pt->wl.kind == SCN_WL_GENERATOR ? cfg_get(pt->wl.generator, "max_context_tokens") : NULL;
    int64_t v = 0;
    int rc = n ? cfg_int64(n, &v, e) : ERR_OK;
    if (!rc && v >= 1) *out = (uint64_t)v;
    return rc;
}

int study_assumptions_run(study_t *s, size_t i, study_assumptions_t *out, err_t *e)
{
    memset(out, 0, sizeof *out);
    study_point_t pt;
    int rc = study_point_resolve(s, i, &pt, e);
    uint64_t ctx = 0;
    if (!rc) rc = run_context(&pt, &ctx, e);
    if (!rc) study_point_free(&pt);
    if (rc) return rc;
    plan_request_t req = {PLAN_DECODE, ctx, 1, 0};
    return study_assumptions_of(s, i, &req, out, e);
}

void study_assumptions_free(study_assumptions_t *a)
{
    for (size_t i = 0; a->v && i < a->n; i++) {
        free(a->v[i].name);
        free(a->v[i].origin);
    }
    free(a->v);
    memset(a, 0, sizeof *a);
}

void study_assumptions_print(FILE *fp, const study_assumptions_t *a)
{
    if (!a->n) return;
    fprintf(fp, "ASSUMED: %zu parameter(s) move this result by more than %.1f%% at +-%.0f%% (%s of %u token(s) at context %llu, %.1f us):\n",
            a->n, 100 * MOVES_REL, 100 * STEP_REL, a->new_tokens > 1 ? "a prefill chunk" : "the plan of one step",
            a->new_tokens, (unsigned long long)a->context_tokens, a->time_us);
    for (size_t i = 0; i < a->n; i++)
        fprintf(fp, "  %-24s = %-10.4g elasticity %+.3f (%+.2f%% / %+.2f%%): %s\n", a->v[i].name, a->v[i].value,
                a->v[i].elasticity, 100 * a->v[i].rel_lo, 100 * a->v[i].rel_hi, a->v[i].origin);
}

json_t *study_assumptions_json(const study_assumptions_t *a)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < a->n; i++)
        json_array_append_new(arr, json_pack("{s:s,s:f,s:s,s:f,s:f,s:f,s:I,s:f}", "name", a->v[i].name, "value",
                                             a->v[i].value, "origin", a->v[i].origin, "elasticity", a->v[i].elasticity,
                                             "time_change_at_0.9x", a->v[i].rel_lo, "time_change_at_1.1x", a->v[i].rel_hi,
                                             "context_tokens", (json_int_t)a->context_tokens, "plan_time_us", a->time_us));
    return arr;
}
