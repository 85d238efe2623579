/* Quality tables answer only what is published; footprints and infeasible configurations. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "models/footprint.h"
#include "models/method.h"
#include "models/quality.h"

Test(quality, lookups_return_points_or_no_data)
{
    char path[4096];
    err_t e;
    quality_t *q;
    cr_assert_eq(quality_load(th_path("models/catalog/quality.yaml", path, sizeof path), &q, &e), 0, "%s", e.msg);
    const quality_point_t *pts[8];
    size_t n;
    cr_assert_eq(quality_lookup(q, "hashattn", "longbench_avg_loss_points", 128, NAN, pts, 8, &n, &e), 0, "%s", e.msg);
    cr_expect_eq(n, 1);
    cr_expect(pts[0]->approx);
    cr_expect(strstr(pts[0]->origin, "2412.14468") != NULL);
    /* the Fathom paper's step agreement at k = 512 and 2048, no point between */
    cr_assert_eq(quality_lookup(q, "fathom", "agent_step_agreement", 56, 512, pts, 8, &n, &e), 0, "%s", e.msg);
    cr_expect_eq(n, 1);
    cr_expect_float_eq(pts[0]->value, 0.53, 1e-12);
    cr_expect_float_eq(pts[0]->context_tokens, 97280, 0);
    cr_expect_str_eq(pts[0]->source, "published");
    cr_expect_eq(quality_lookup(q, "fathom", "agent_step_agreement", 56, 1024, pts, 8, &n, &e), ERR_NOTFOUND);
    cr_expect(strstr(e.msg, "no data") != NULL, "%s", e.msg);
    cr_expect_eq(quality_lookup(q, "hashattn", NULL, 64, NAN, pts, 8, &n, &e), ERR_NOTFOUND, "never interpolates");
    cr_expect_eq(quality_lookup(q, "sparq", "ruler_score", NAN, NAN, pts, 8, &n, &e), ERR_NOTFOUND, "claims are not numbers");
    cr_expect(strstr(e.msg, "1 qualitative claim") != NULL, "%s", e.msg);
    bool higher;
    cr_expect(quality_metric(q, "longbench_avg_loss_points", &higher) && !higher);
    cr_expect(quality_metric(q, "ruler_score", &higher) && higher);
    cr_expect(!quality_metric(q, "rouge", NULL));
    for (size_t i = 0; quality_at(q, i); i++) cr_expect(*quality_at(q, i)->origin, "every point has an origin");
    quality_free(q);
    const char *bad = "points:\n  - method: sparq\n    origin: x\n    model: m\n    context: c\n";
    cr_expect_neq(quality_load_string("q.yaml", bad, &q, &e), 0);
    cr_expect(strstr(e.msg, "q.yaml:2:") != NULL, "%s", e.msg);
    const char *unknown = "metrics: {a: {better: higher, meaning: m}, b: {better: lower, meaning: m}}\n"
                          "points:\n  - {method: sparq, metric: c, value: 1, origin: x, model: m, context: c}\n";
    cr_expect_neq(quality_load_string("q.yaml", unknown, &q, &e), 0);
    cr_expect(strstr(e.msg, "q.yaml:3:29: key 'points[0].metric': unknown metric 'c' (declared: a, b)") != NULL, "%s", e.msg);
}

static method_t *mk(const llm_t *m, const char *yaml)
{
    err_t e;
    cfg_doc_t *d;
    cr_assert_eq(cfg_parse_string("m.yaml", yaml, strlen(yaml), &d, &e), 0);
    method_cfg_t cfg;
    method_t *mt;
    cr_assert_eq(method_cfg_bind(cfg_root(d), &cfg, &e), 0, "%s", e.msg);
    cr_assert_eq(method_new(&cfg, m, &mt, &e), 0, "%s", e.msg);
    cfg_free(d);
    return mt;
}

Test(footprint, qwen3_8b_1m_session)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    method_t *mt = mk(&t.m, "method: pertoken\nbudget: 136");
    footprint_t f;
    footprint_session(mt, 1048576, &f);
    cr_expect(fabs(f.host_kv_bytes / 1e9 - 154.6) < 0.1, "bf16 K/V %g GB (about 155)", f.host_kv_bytes / 1e9);
    cr_expect_float_eq(f.host_index_bytes, 17.0 * 1048576 * 8 * 36, 1e-9);
    cr_expect_eq(f.hbm_index_bytes, 0);
    cr_expect_float_eq(f.hbm_tail_bytes, 1024.0 * 36 * 8 * 512, 1e-9, "no window: the open chunk's buffer of T tokens");
    footprint_total_t tot;
    err_t e;
    cr_expect_eq(footprint_check(mt, &t.hw, 1048576, 6, &tot, &e), 0, "%s", e.msg);
    cr_expect_eq(footprint_check(mt, &t.hw, 1048576, 7, &tot, &e), ERR_INFEASIBLE);
    cr_expect(strstr(e.msg, "host DRAM") && strstr(e.msg, "GiB"), "%s", e.msg);
    method_free(mt);

    mt = mk(&t.m, "method: pertoken\nkv_dtype: fp8\nplacement: hbm\nwindow: 262144");
    footprint_session(mt, 1048576, &f);
    cr_expect_float_eq(f.host_kv_bytes, (1048576.0 - 262144) * 36 * 8 * 256, 1e-9);
    cr_expect_float_eq(f.hbm_index_bytes, 17.0 * (1048576 - 262144) * 8 * 36, 1e-9);
    cr_expect_float_eq(f.hbm_tail_bytes, 262144.0 * 36 * 8 * 512, 1e-9, "the window holds the open chunk");
    cr_expect_eq(footprint_check(mt, &t.hw, 1048576, 3, &tot, &e), 0, "%s", e.msg);
    cr_expect_eq(footprint_check(mt, &t.hw, 1048576, 4, &tot, &e), ERR_INFEASIBLE);
    cr_expect(strstr(e.msg, "HBM") != NULL, "%s", e.msg);
    method_free(mt);
    th_machine_free(&t);
}

Test(footprint, llama_70b_bf16_leaves_about_9_GiB)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "llama-3.1-70b");
    method_t *mt = mk(&t.m, "method: pertoken\nwindow: 131072");
    footprint_total_t tot;
    err_t e;
    footprint_t f;
    footprint_session(mt, 1048576, &f);
    double left = (t.hw.hbm_bytes - f.hbm_weight_bytes) / 1073741824.0;
    cr_expect(left > 8.5 && left < 9.5, "%g GiB left", left);
    cr_expect_eq(footprint_check(mt, &t.hw, 1048576, 1, &tot, &e), ERR_INFEASIBLE, "a 128k-token bf16 window does not fit");
    method_free(mt);
    /* nor does anything: weights leaving 5% of usable HBM are infeasible on their own (the 10% rule) */
    mt = mk(&t.m, "method: pertoken");
    cr_expect_eq(footprint_check(mt, &t.hw, 32768, 1, &tot, &e), ERR_INFEASIBLE);
    cr_expect(strstr(e.msg, "leave 5.0% of a h200-sxm's") && strstr(e.msg, "weight_dtype fp8"), "%s", e.msg);
    method_free(mt);
    mt = mk(&t.m, "method: pertoken\nweight_dtype: fp8\nwindow: 131072");
    cr_expect_eq(footprint_check(mt, &t.hw, 1048576, 1, &tot, &e), 0, "%s", e.msg);
    method_free(mt);
    th_machine_free(&t);
}
