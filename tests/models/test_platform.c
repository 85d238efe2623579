/* A profile carried to other hardware by its platform's rules (models/platform.h): closed forms
 * of the link rule, the SM path's ceiling, and which origins turn "assumed". */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "models/platform.h"

static const char *const profile =
    "profile: t\n"
    "platform: {gpu: h200-sxm, link: pcie5, host: h200-1, virtualisation: \"test VM\"}\n"
    "params:\n"
    "  h2d_GBps: {value: 50, origin: \"fitted: t\"}\n"
    "  d2h_GBps: {value: 45, origin: \"fitted: t\"}\n"
    "  duplex_GBps: {value: 76, origin: \"fitted: t\"}\n"
    "  ce_latency_us: {value: 4, origin: \"fitted: t\"}\n"
    "  gather_peak_GBps: {value: 40, origin: \"fitted: t\"}\n"
    "  gather_blocks: {value: 100, origin: \"fitted: t\"}\n"
    "  gather_block_GBps: {value: 2, origin: \"fitted: t\"}\n"
    "  gather_rows_Mps: {points: {1GiB: {value: 100, origin: \"fitted: t\"}}}\n"
    "  scan_mem_eff: {value: 0.5, origin: \"fitted: t\"}\n";

/* The profile (with or without its platform line) carried to box/link of the committed catalogs. */
static calib_t *carried(const char *box, const char *link, bool platform)
{
    char p[4096];
    err_t e;
    hwcat_t *cat;
    cr_assert_eq(hwcat_load(th_path("models/catalog", p, sizeof p), &cat, &e), 0, "%s", e.msg);
    hw_t hw;
    hw_select_t sel = {.box = box, .link = link};
    cr_assert_eq(hw_resolve(cat, &sel, NULL, &hw, &e), 0, "%s", e.msg);
    char text[4096];
    snprintf(text, sizeof text, "%s", profile);
    if (!platform) {
        char *at = strstr(text, "platform:"), *end = strchr(at, '\n');
        memmove(at, end + 1, strlen(end + 1) + 1);
    }
    calib_t *c;
    cr_assert_eq(calib_load_string("t.yaml", text, &c, &e), 0, "%s", e.msg);
    cr_assert_eq(platform_apply(c, cat, &hw, &e), 0, "%s", e.msg);
    hw_free(&hw);
    hwcat_free(cat);
    return c;
}

static double val(const calib_t *c, const char *n) { return calib_find(c, n)->value; }
static bool assumed(const calib_t *c, const char *n) { return !strncmp(calib_find(c, n)->origin, "assumed", 7); }

Test(platform, declared_and_read)
{
    calib_t *c = carried("h200-1", NULL, true);
    const calib_platform_t *pl = calib_platform(c);
    cr_assert_not_null(pl);
    cr_expect_str_eq(pl->gpu, "h200-sxm");
    cr_expect_str_eq(pl->link, "pcie5");
    cr_expect_str_eq(pl->host, "h200-1");
    cr_expect_str_eq(pl->virtualisation, "test VM");
    calib_free(c);
    err_t e;
    const char *bad = "platform: {gpu: h200-sxm, link: pcie5, host: h200-1, hots: x}\nparams: {}\n";
    cr_expect_neq(calib_load_string("bad.yaml", bad, &c, &e), 0);
    cr_expect(strstr(e.msg, "bad.yaml:1:") && strstr(e.msg, "hots"), "%s", e.msg);
}

Test(platform, own_platform_changes_nothing)
{
    calib_t *c = carried("h200-1", "pcie5", true);
    static const char *const names[] = {"h2d_GBps", "d2h_GBps", "duplex_GBps", "ce_latency_us", "gather_peak_GBps",
                                        "gather_rows_Mps_1GiB", "scan_mem_eff"};
    static const double want[] = {50, 45, 76, 4, 40, 100, 0.5};
    for (size_t i = 0; i < 7; i++) {
        cr_expect_eq(val(c, names[i]), want[i], "%s", names[i]);
        cr_expect_str_eq(calib_find(c, names[i])->origin, "fitted: t");
    }
    calib_free(c);
}

Test(platform, another_link_scales_raw_by_the_measured_efficiency)
{
    calib_t *c = carried("h200-1", "pcie6", true);
    double h2d = 121 * 50 / 63.0, d2h = 121 * 45 / 63.0;
    cr_expect_float_eq(val(c, "h2d_GBps"), h2d, 1e-9);
    cr_expect_float_eq(val(c, "d2h_GBps"), d2h, 1e-9);
    cr_expect_float_eq(val(c, "duplex_GBps"), (h2d + d2h) * 76 / 95.0, 1e-9);
    cr_expect_float_eq(val(c, "gather_peak_GBps"), h2d * 40 / 50.0, 1e-9, "the SM path's link share");
    cr_expect_eq(val(c, "ce_latency_us"), 4);
    cr_expect(assumed(c, "h2d_GBps") && assumed(c, "duplex_GBps") && assumed(c, "gather_peak_GBps") && assumed(c, "ce_latency_us"));
    cr_expect_not(assumed(c, "gather_rows_Mps_1GiB"), "the same host: its row rates are measured");
    cr_expect_not(assumed(c, "scan_mem_eff"), "the same GPU");
    calib_free(c);
}

Test(platform, sm_side_limit_binds_on_a_fast_link)
{
    calib_t *c = carried("h200-1", "c2c", true);
    cr_expect_float_eq(val(c, "h2d_GBps"), 450 * 50 / 63.0, 1e-9);
    cr_expect_float_eq(val(c, "gather_peak_GBps"), 100 * 2.0, 1e-9, "blocks x per-block rate, not 40 GB/s");
    cr_expect(strstr(calib_find(c, "gather_peak_GBps")->origin, "SM-side limit binds"), "%s", calib_find(c, "gather_peak_GBps")->origin);
    calib_free(c);
}

Test(platform, another_gpu_and_host_are_labelled)
{
    calib_t *c = carried("hgx-b200-8", NULL, true);
    cr_expect_eq(val(c, "h2d_GBps"), 50, "B200 hosts are Gen5: the profile's link");
    cr_expect_not(assumed(c, "h2d_GBps"));
    cr_expect_eq(val(c, "scan_mem_eff"), 0.5);
    cr_expect(assumed(c, "scan_mem_eff") && strstr(calib_find(c, "scan_mem_eff")->origin, "applied to b200"));
    cr_expect(assumed(c, "gather_rows_Mps_1GiB") && strstr(calib_find(c, "gather_rows_Mps_1GiB")->origin, "hgx-b200-8"));
    cr_expect(strstr(calib_find(c, "gather_rows_Mps_1GiB")->origin, "fitted: t"), "kept with its origin");
    calib_free(c);
}

Test(platform, box_figures_unless_a_link_is_named)
{
    calib_t *c = carried("dgx-a100-8", NULL, true);
    cr_expect_eq(val(c, "h2d_GBps"), 25);
    cr_expect(strstr(calib_find(c, "h2d_GBps")->origin, "published") == calib_find(c, "h2d_GBps")->origin);
    calib_free(c);
    c = carried("dgx-a100-8", "pcie4", true);
    cr_expect_float_eq(val(c, "h2d_GBps"), 31.5 * 50 / 63.0, 1e-9);
    calib_free(c);
}

Test(platform, without_a_platform_the_measured_link_is_the_reference)
{
    calib_t *c = carried("hgx-b200-8", "pcie6", false);
    cr_expect_null(calib_platform(c));
    cr_expect_float_eq(val(c, "h2d_GBps"), 121 * 50 / 63.0, 1e-9);
    cr_expect_not(assumed(c, "scan_mem_eff"), "an unknown GPU: nothing to compare");
    calib_free(c);
}
