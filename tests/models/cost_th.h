/* cost_th — the cost tests' shared steps: set and read a profile parameter, ready a cost model
 * and its paths for GPU 0 reading host DRAM. */
#ifndef ODSIM_TESTS_MODELS_COST_TH_H
#define ODSIM_TESTS_MODELS_COST_TH_H

#include <criterion/criterion.h>
#include "helpers.h"
#include "models/cost.h"
#include "models/provider.h"
#include "validation/protocol.h"

static inline void set(calib_t *cal, const char *name, double v)
{
    err_t e;
    calib_param_t p = {name, v, 0, 1, 0, "", "assumed: test"};
    cr_assert_eq(calib_set(cal, &p, &e), 0, "%s", e.msg);
}

static inline double get(calib_t *cal, const char *name)
{
    double v;
    err_t e;
    cr_assert_eq(calib_get(cal, name, &v, &e), 0, "%s", e.msg);
    return v;
}

/* c and paths from t's profile, for GPU 0 reading host DRAM. */
static inline void cost_ready(tmachine_t *t, cost_t *c, cost_paths_t *paths)
{
    err_t e;
    cr_assert_eq(cost_init(c, t->cal, &e), 0, "%s", e.msg);
    cr_assert_eq(cost_paths_resolve(c, &t->hw, t->sim, 0, HWINST_DRAM, paths, &e), 0, "%s", e.msg);
}

/* The plan of req for the method of p's as kbench times it (validation/protocol.h): the layers alone,
 * its kernels and gathers as `how` says. Its GEMMs' cost models die with the wrapper: read op.cost. */
static inline void build_as(tmachine_t *t, provider_t *p, protocol_t how, const plan_request_t *req, plan_t *plan)
{
    err_t e;
    protocol_prov_t *pp;
    how.layers_only = true;
    cr_assert_eq(protocol_new(provider_method(p), &t->hw, t->cal, &how, &pp, &e), 0, "%s", e.msg);
    cr_assert_eq(protocol_build(pp, t->sim, 0, req, plan, &e), 0, "%s", e.msg);
    protocol_free(pp);
}

/* One layer of a plan of `yaml` at ctx tokens; returns the provider (caller frees plan and provider). */
static inline provider_t *build(tmachine_t *t, const char *yaml, uint64_t ctx, plan_t *plan)
{
    err_t e;
    provider_t *p = th_provider(t, yaml);
    plan_init(plan);
    plan_request_t req = {PLAN_DECODE, ctx, 1, 0};
    build_as(t, p, (protocol_t){0}, &req, plan);
    cr_assert_eq(plan_validate(plan, &e), 0, "%s", e.msg);
    return p;
}

#endif
