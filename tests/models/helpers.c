#include "helpers.h"
#include "models/platform.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *th_path(const char *rel, char *buf, size_t n)
{
    const char *root = getenv("ODSIM_ROOT");
    snprintf(buf, n, "%s/%s", root && *root ? root : ".", rel);
    return buf;
}

void th_machine(tmachine_t *t, const char *box, const char *link, const char *model)
{
    char p[4096];
    err_t e;
    memset(t, 0, sizeof *t);
    cr_assert_eq(hwcat_load(th_path("models/catalog", p, sizeof p), &t->cat, &e), 0, "%s", e.msg);
    cr_assert_eq(llmcat_load(th_path("models/catalog/llms.yaml", p, sizeof p), &t->llms, &e), 0, "%s", e.msg);
    hw_select_t sel = {.box = box, .link = link};
    cr_assert_eq(hw_resolve(t->cat, &sel, NULL, &t->hw, &e), 0, "%s", e.msg);
    /* the pre-fit seeds: a fixed, hand-written profile (the presets hold no cost-model parameters) */
    cr_assert_eq(calib_load(th_path("validation/seeds.yaml", p, sizeof p), &t->cal, &e), 0, "%s", e.msg);
    cr_assert_eq(platform_apply(t->cal, t->cat, &t->hw, &e), 0, "%s", e.msg);
    cr_assert_eq(calib_seed(t->cal, &t->hw, &e), 0, "%s", e.msg);
    cr_assert_eq(sim_new(&t->sim, &e), 0, "%s", e.msg);
    cr_assert_eq(hwinst_build(&t->hw, t->cal, t->sim, &e), 0, "%s", e.msg);
    if (model) cr_assert_eq(llm_get(t->llms, model, NULL, &t->m, &e), 0, "%s", e.msg);
}

void th_machine_free(tmachine_t *t)
{
    sim_free(t->sim);
    calib_free(t->cal);
    hw_free(&t->hw);
    llm_free(&t->m);
    llmcat_free(t->llms);
    hwcat_free(t->cat);
}

provider_t *th_provider(tmachine_t *t, const char *yaml)
{
    err_t e;
    cfg_doc_t *d;
    cr_assert_eq(cfg_parse_string("m.yaml", yaml, strlen(yaml), &d, &e), 0, "%s", e.msg);
    method_cfg_t cfg;
    cr_assert_eq(method_cfg_bind(cfg_root(d), &cfg, &e), 0, "%s", e.msg);
    provider_t *p;
    cr_assert_eq(provider_new(&cfg, &t->m, &t->hw, t->cal, &p, &e), 0, "%s", e.msg);
    cfg_free(d);
    return p;
}

provider_t *th_plan(tmachine_t *t, const char *yaml, plan_phase_t phase, uint64_t ctx, uint32_t new_tokens, plan_t *plan)
{
    err_t e;
    provider_t *p = th_provider(t, yaml);
    plan_init(plan);
    plan_request_t req = {phase, ctx, new_tokens, 0};
    cr_assert_eq(provider_build(p, t->sim, 0, &req, plan, &e), 0, "%s", e.msg);
    cr_assert_eq(plan_validate(plan, &e), 0, "%s", e.msg);
    return p;
}
