/* The defaults every method shares: one selection rule (per query head, a KV head fetching the union)
 * and k = 512, reproducing the published winner volume; and what the defaults make of the per-token
 * 136-bit scan against Fathom 56 at 1M to 4M tokens on the committed calibration. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "models/method.h"
#include "models/opkind.h"
#include "models/provider.h"
#include "sim/plan.h"

/* Winner bytes from the host over one decode step of `yaml` at ctx tokens, and the step's time alone
 * (s) on h200-1 with profile cal (NULL: the machine's). */
static double step(tmachine_t *t, calib_t *cal, const char *yaml, uint64_t ctx, double *winner_bytes)
{
    err_t e;
    cfg_doc_t *d;
    cr_assert_eq(cfg_parse_string("m.yaml", yaml, strlen(yaml), &d, &e), 0, "%s", e.msg);
    method_cfg_t cfg;
    cr_assert_eq(method_cfg_bind(cfg_root(d), &cfg, &e), 0, "%s", e.msg);
    cfg_free(d);
    provider_t *p;
    cr_assert_eq(provider_new(&cfg, &t->m, &t->hw, cal ? cal : t->cal, &p, &e), 0, "%s", e.msg);
    plan_t plan;
    plan_init(&plan);
    plan_request_t req = {PLAN_DECODE, ctx, 1, 0};
    cr_assert_eq(provider_build(p, t->sim, 0, &req, &plan, &e), 0, "%s", e.msg);
    double w = 0;
    for (uint32_t i = 0; i < plan.n_ops; i++)
        if (plan.ops[i].kind == OPKIND_WINNER_FETCH) w += plan.ops[i].bytes_host;
    if (winner_bytes) *winner_bytes = w;
    sim_ps_t ps;
    cr_assert_eq(plan_standalone_ps(&plan, t->sim, 0, &ps, &e), 0, "%s", e.msg);
    plan_free(&plan);
    provider_free(p);
    return (double)ps * 1e-12;
}

/* 36 layers x 8 KV heads x u = (1 + 4)/2 x 512 rows x 512 B (K and V, d = 128, bf16) = 188,743,680 B:
 * the Fathom paper's "about 200 MB" at k = 512; one set per KV head would give 75.5 MB. */
Test(selection, one_rule_gives_every_method_the_published_winner_volume)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    const char *methods[] = {"method: pertoken", "method: sparq", "method: fathom", "method: hashattn", "method: landmark"};
    double expect = 36.0 * 8 * 2.5 * 512 * 512;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        double w;
        step(&t, NULL, methods[i], 32768, &w);
        cr_expect_float_eq(w, expect, 1e-6, "%s: %g B of winners", methods[i], w);
    }
    cr_expect(fabs(expect / 200e6 - 1) < 0.06, "%g MB against the published ~200", expect / 1e6);
    double kv;
    step(&t, NULL, "method: fathom\nselect: kv_head", 32768, &kv);
    cr_expect_float_eq(kv, 36.0 * 8 * 512 * 512, 1e-6, "per KV head: %g B", kv);
    th_machine_free(&t);
}

/* The per-token 136-bit scan against Fathom 56 with the defaults (contiguous planes, k = 512 per
 * query head): Fathom reads 2.5x fewer index bytes in ~80 runs per KV head, so it keeps its lead
 * as the context grows past the SM path's translation cliff (chunked planes lost it past ~1.2M). */
Test(selection, pertoken_136_over_fathom_56_holds_from_1m_to_4m)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    char path[4096];
    calib_t *cal;
    err_t e;
    cr_assert_eq(calib_load(th_path("models/calib/h200.yaml", path, sizeof path), &cal, &e), 0, "%s", e.msg);
    cr_assert_eq(calib_seed(cal, &t.hw, &e), 0, "%s", e.msg);
    double ratio[3];
    for (int i = 0; i < 3; i++) {
        uint64_t ctx = (uint64_t)1048576 << i;
        ratio[i] = step(&t, cal, "method: pertoken\nbudget: 136", ctx, NULL) / step(&t, cal, "method: fathom\nbudget: 56", ctx, NULL);
    }
    cr_expect(ratio[0] >= 1.3, "1M: pertoken/fathom %g", ratio[0]);
    cr_expect(ratio[1] >= 0.98 * ratio[0], "2M: %g after %g at 1M", ratio[1], ratio[0]);
    cr_expect(ratio[2] >= 0.98 * ratio[1], "4M: %g after %g at 2M", ratio[2], ratio[1]);
    calib_free(cal);
    th_machine_free(&t);
}
