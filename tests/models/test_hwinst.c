/* Hardware instantiated in an engine; the cost forms against DESIGN.md's H200 table. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "models/cost.h"
#include "models/hwinst.h"

Test(hwinst, resources_and_pools_follow_the_naming_convention)
{
    tmachine_t t;
    th_machine(&t, "hgx-h200-8", NULL, NULL);
    const char *names[] = {"gpu0.h2d", "gpu7.d2h", "gpu3.duplex", "gpu5.hbm", "gpu1.flops_bf16", "gpu1.flops_fp8",
                           "gpu2.sm", "switch0.up_h2d", "switch3.up_d2h", "host.dram"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_expect_geq(sim_res_find(t.sim, names[i]), 0, "%s", names[i]);
    cr_expect_lt(sim_res_find(t.sim, "switch4.up_h2d"), 0);
    cr_expect_lt(sim_res_find(t.sim, "cxl.read"), 0);
    cr_expect_float_eq(sim_res_capacity(t.sim, sim_res_find(t.sim, "gpu0.h2d")), 55.3e9, 1);
    cr_expect_float_eq(sim_res_capacity(t.sim, sim_res_find(t.sim, "host.dram")), 614e9, 1);
    cr_expect_geq(sim_pool_find(t.sim, "gpu7.hbm_mem"), 0);
    cr_expect_geq(sim_pool_find(t.sim, "host.dram_mem"), 0);
    plan_use_t u[PLAN_MAX_USES];
    uint8_t n;
    err_t e;
    cr_assert_eq(hwinst_path_h2d(&t.hw, t.sim, 3, HWINST_DRAM, 1.0, u, &n, &e), 0, "%s", e.msg);
    cr_assert_eq(n, 5);
    cr_expect_str_eq(sim_res_name(t.sim, u[0].res), "host.dram");
    cr_expect_str_eq(sim_res_name(t.sim, u[1].res), "switch1.up_h2d");
    cr_expect_str_eq(sim_res_name(t.sim, u[2].res), "gpu3.h2d");
    cr_expect_eq(hwinst_path_h2d(&t.hw, t.sim, 3, HWINST_CXL, 1.0, u, &n, &e), ERR_INVAL);
    th_machine_free(&t);
}

Test(hwinst, cxl_tier_is_in_series)
{
    tmachine_t t;
    th_machine(&t, "hgx-h200-8-cxl", NULL, NULL);
    plan_use_t u[PLAN_MAX_USES];
    uint8_t n;
    err_t e;
    cr_assert_eq(hwinst_path_h2d(&t.hw, t.sim, 0, HWINST_CXL, 1.0, u, &n, &e), 0, "%s", e.msg);
    cr_expect_str_eq(sim_res_name(t.sim, u[0].res), "cxl.read");
    cr_expect_str_eq(sim_res_name(t.sim, u[2].res), "gpu0.h2d");
    cr_expect_geq(sim_pool_find(t.sim, "cxl.mem"), 0);
    th_machine_free(&t);
}

/* GB/s of one transfer alone. */
static double gbps(tmachine_t *t, cost_xfer_t form, double bytes, double pieces, double region)
{
    cost_t c;
    cost_paths_t p;
    err_t e;
    cr_assert_eq(cost_init(&c, t->cal, &e), 0, "%s", e.msg);
    cr_assert_eq(cost_paths_resolve(&c, &t->hw, t->sim, 0, HWINST_DRAM, &p, &e), 0, "%s", e.msg);
    plan_op_t op;
    memset(&op, 0, sizeof op);
    cost_transfer(&c, &p, form, true, bytes, pieces, region, COST_GATHER_ALONE, &op);
    sim_ps_t ps;
    cr_assert_eq(plan_op_alone_ps(&op, t->sim, &ps, &e), 0, "%s", e.msg);
    return bytes / ((double)ps / 1e12) / 1e9;
}

Test(cost, copy_engine_matches_the_h200_size_table)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, NULL);
    const double kib[] = {4, 64, 256, 1024, 4096, 65536};
    const double want[] = {0.8, 11, 28, 44, 52, 55.3};
    for (int i = 0; i < 6; i++) {
        double g = gbps(&t, COST_CE, kib[i] * 1024, 1, 0);
        cr_expect(fabs(g - want[i]) / want[i] < 0.06, "%g KiB: %g GB/s, measured %g", kib[i], g, want[i]);
    }
    th_machine_free(&t);
}

Test(cost, batched_copy_and_sm_gather)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, NULL);
    double n = 4096;  /* pieces */
    cr_expect(fabs(gbps(&t, COST_CE_BATCH, n * 512, n, 0) - 1.0) < 0.1, "512 B pieces ~1 GB/s");
    cr_expect(fabs(gbps(&t, COST_CE_BATCH, n * 4096, n, 0) - 7.5) < 0.6, "4 KiB pieces ~7.5 GB/s");
    double g32 = gbps(&t, COST_CE_BATCH, n * 32768, n, 0);
    cr_expect(g32 > 23 && g32 < 31, "32 KiB pieces %g", g32);
    double MiB = 1048576, GiB = 1024 * MiB, big = 64 * MiB;
    /* 256 B rows: 51 at 256 MiB, 27 at 1 GiB, 11 at 4 GiB, 8 at 16 GiB */
    double r256[] = {51, 27, 11, 8}, regions[] = {256 * MiB, GiB, 4 * GiB, 16 * GiB};
    for (int i = 0; i < 4; i++) {
        double g = gbps(&t, COST_SM_GATHER, big, big / 256, regions[i]);
        cr_expect(fabs(g - r256[i]) / r256[i] < 0.1, "256 B over %g GiB: %g, measured %g", regions[i] / GiB, g, r256[i]);
    }
    double r2k = gbps(&t, COST_SM_GATHER, big, big / 2048, 16 * GiB);
    cr_expect(fabs(r2k - 51) < 3, "2 KiB rows stay at ~51: %g", r2k);
    /* beyond the last measured region the prediction is flagged */
    calib_notes_reset(t.cal);
    gbps(&t, COST_SM_GATHER, big, big / 512, 64 * GiB);
    calib_flag_t f;
    bool found = false;
    for (size_t i = 0; calib_flag_at(t.cal, i, &f); i++)
        if (!strcmp(f.name, "gather_rows_Mps_16GiB") && f.outside) found = true;
    cr_expect(found, "64 GiB region flagged outside the fitted range");
    th_machine_free(&t);
}

Test(calib, profile_overrides_and_flags)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, NULL);
    err_t e;
    calib_t *c;
    const char *y = "profile: test\nparams:\n  ce_latency_us: {value: 5.1, stderr: 0.1, lo: 4096, hi: 67108864, unit: us, "
                    "origin: \"fitted: ce.csv\"}\n";
    cr_assert_eq(calib_load_string("p.yaml", y, &c, &e), 0, "%s", e.msg);
    cr_assert_eq(calib_seed(c, &t.hw, &e), 0);
    cr_expect_float_eq(calib_find(c, "ce_latency_us")->value, 5.1, 1e-12);
    cr_expect_float_eq(calib_find(c, "h2d_GBps")->value, 55.3, 1e-12, "seeded from the preset");
    cr_expect_neq(calib_hash(c), 0);
    calib_note(c, "ce_latency_us", 1e9);
    calib_note(c, "kernel_latency_us", NAN);
    calib_note(c, "h2d_GBps", NAN);
    calib_flag_t f;
    cr_assert(calib_flag_at(c, 0, &f));
    cr_expect_str_eq(f.name, "ce_latency_us");
    cr_expect_eq(f.outside, 1);
    cr_assert(calib_flag_at(c, 1, &f));
    cr_expect_str_eq(f.name, "kernel_latency_us");
    cr_expect(f.assumed);
    cr_expect_not(calib_flag_at(c, 2, &f), "h2d_GBps is measured and carries no range");
    calib_free(c);

    const char *bad = "params:\n  ce_latncy_us: {value: 5, origin: x}\n";
    cr_expect_neq(calib_load_string("p.yaml", bad, &c, &e), 0);
    cr_expect(strstr(e.msg, "p.yaml:2:") && strstr(e.msg, "ce_latncy_us"), "%s", e.msg);
    const char *badunit = "params:\n  ce_latency_us: {value: 5, unit: ms, origin: x}\n";
    cr_expect_neq(calib_load_string("p.yaml", badunit, &c, &e), 0);
    cr_expect(strstr(e.msg, "p.yaml:2:") && strstr(e.msg, "unit"), "%s", e.msg);
    char path[4096];
    cr_assert_eq(calib_load(th_path("models/calib/h200.yaml", path, sizeof path), &c, &e), 0, "%s", e.msg);
    calib_free(c);
    th_machine_free(&t);
}
