/* Catalogs: presets, inheritance and origins, overrides, and the errors users meet. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "models/hwcat.h"
#include "models/llm.h"

Test(catalog, presets_load_with_origins)
{
    tmachine_t t;
    th_machine(&t, "hgx-h200-8", NULL, "qwen3-8b");
    cr_expect_eq(t.hw.gpus, 8);
    cr_expect_eq(t.hw.gpus_per_switch, 2);
    cr_expect_float_eq(t.hw.h2d_Bps, 55.3e9, 1);
    cr_expect_float_eq(t.hw.duplex_Bps, 97.9e9, 1);
    cr_expect_float_eq(t.hw.hbm_bytes, 143771.0 * 1048576, 1);
    for (size_t i = 0; i < t.hw.params.n; i++) {
        const hw_param_t *p = &t.hw.params.p[i];
        cr_expect(p->origin && *p->origin, "parameter %s has no origin", p->key);
    }
    const char *want[] = {"h200-sxm", "h100-sxm", "a100-sxm", "l40s", "gh200", "b200"};
    for (size_t i = 0; i < 6; i++) cr_expect_not_null(hwcat_entry(t.cat, HW_GPU, want[i]), "%s", want[i]);
    const char *links[] = {"pcie3", "pcie4", "pcie5", "pcie6", "c2c"};
    for (size_t i = 0; i < 5; i++) cr_expect_not_null(hwcat_entry(t.cat, HW_LINK, links[i]), "%s", links[i]);
    cr_expect_not_null(hwcat_entry(t.cat, HW_TIER, "cxl-x16"));
    th_machine_free(&t);
}

Test(catalog, inherited_parameters_are_assumed)
{
    tmachine_t t;
    th_machine(&t, "dgx-a100-8", NULL, NULL);
    const hw_param_t *p = hw_param(&t.hw, "gather_peak_GBps");
    cr_assert_not_null(p);
    cr_expect(strstr(p->origin, "assumed: copied from h200-sxm") == p->origin, "%s", p->origin);
    cr_expect_str_eq(t.hw.link, "pcie4");
    cr_expect_float_eq(t.hw.h2d_Bps, 25e9, 1);
    cr_expect_str_eq(t.hw.memory, "HBM2e");
    th_machine_free(&t);
}

Test(catalog, link_replacement_and_overrides)
{
    tmachine_t t;
    th_machine(&t, "hgx-b200-8", NULL, NULL);
    cr_expect_str_eq(t.hw.link, "pcie5", "shipping B200 hosts are Gen5");
    err_t e;
    hw_t hw;
    hw_select_t sel = {.box = "hgx-b200-8", .link = "pcie6"};
    cfg_doc_t *ov;
    const char *y = "h2d_GBps: 100\nhost_dram_GBps: {value: 800, origin: \"what-if\"}\n";
    cr_assert_eq(cfg_parse_string("ov.yaml", y, strlen(y), &ov, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_resolve(t.cat, &sel, cfg_root(ov), &hw, &e), 0, "%s", e.msg);
    cr_expect_str_eq(hw.link, "pcie6");
    cr_expect_float_eq(hw.h2d_Bps, 100e9, 1);
    cr_expect_null(hw_param(&hw, "d2h_GBps"), "pcie6 was never measured: its peaks are derived (models/platform.h)");
    cr_expect_float_eq(hw_param(&hw, "raw_GBps")->value, 121, 1e-9);
    cr_expect_float_eq(hw.host_dram_Bps, 800e9, 1);
    cr_expect(strstr(hw_param(&hw, "h2d_GBps")->origin, "override at ov.yaml:1") != NULL, "%s",
              hw_param(&hw, "h2d_GBps")->origin);
    cr_expect_str_eq(hw_param(&hw, "host_dram_GBps")->origin, "what-if");
    hw_free(&hw);
    cfg_free(ov);

    sel = (hw_select_t){.box = "hgx-h200-8", .link = "pcie9"};
    cr_expect_eq(hw_resolve(t.cat, &sel, NULL, &hw, &e), ERR_NOTFOUND);
    cr_expect(strstr(e.msg, "pcie9") && strstr(e.msg, "pcie5"), "%s", e.msg);
    sel = (hw_select_t){.box = "hgx-h200-8-cxl"};
    cr_assert_eq(hw_resolve(t.cat, &sel, NULL, &hw, &e), 0, "%s", e.msg);
    cr_expect_str_eq(hw.tier, "cxl-x16");
    cr_expect_float_eq(hw.cxl_read_Bps, 50e9, 1);
    hw_free(&hw);
    th_machine_free(&t);
}

Test(catalog, node_resolution)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, NULL);
    err_t e;
    cfg_doc_t *d;
    const char *y = "box: gh200-1\nlink: pcie5\ngpus: 2\nset: {gather_weight: 2}\n";
    cr_assert_eq(cfg_parse_string("s.yaml", y, strlen(y), &d, &e), 0, "%s", e.msg);
    hw_t hw;
    cr_assert_eq(hw_resolve_node(t.cat, cfg_root(d), &hw, &e), 0, "%s", e.msg);
    cr_expect_eq(hw.gpus, 2);
    cr_expect_float_eq(hw.h2d_Bps, 55.3e9, 1, "a named link replaces the box's own figures");
    cr_expect_not(hw.link_from_box);
    cr_expect_float_eq(hw_param(&hw, "gather_weight")->value, 2.0, 1e-12);
    hw_free(&hw);
    cfg_free(d);
    const char *gen6 = "box: gh200-1\nlink: pcie6\n";
    cr_assert_eq(cfg_parse_string("s.yaml", gen6, strlen(gen6), &d, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_resolve_node(t.cat, cfg_root(d), &hw, &e), 0, "%s", e.msg);
    cr_expect_null(hw_param(&hw, "h2d_GBps"), "the box's C2C figure is not pcie6's");
    hw_free(&hw);
    cfg_free(d);
    const char *own = "box: gh200-1\n";
    cr_assert_eq(cfg_parse_string("s.yaml", own, strlen(own), &d, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_resolve_node(t.cat, cfg_root(d), &hw, &e), 0, "%s", e.msg);
    cr_expect_str_eq(hw.link, "c2c");
    cr_expect_float_eq(hw.h2d_Bps, 360e9, 1, "the box's published figure for its own link");
    cr_expect(hw.link_from_box);
    hw_free(&hw);
    cfg_free(d);
    th_machine_free(&t);
}

/* Loads text as a links catalog and returns the error message. */
static int load_bad(hw_kind_t kind, const char *text, err_t *e)
{
    hwcat_t *cat;
    cr_assert_eq(hwcat_new(&cat, e), 0);
    int rc = hwcat_load_string(cat, kind, "bad.yaml", text, e);
    hwcat_free(cat);
    return rc;
}

Test(catalog, misspelled_key_names_file_line_key)
{
    err_t e;
    const char *y = "pcie5:\n  h2d_GBps: {value: 55, origin: x}\n  d2h_GBps: {value: 55, origin: x}\n"
                    "  duplx_GBps: {value: 97, origin: x}\n";
    cr_assert_neq(load_bad(HW_LINK, y, &e), 0);
    cr_expect(strstr(e.msg, "bad.yaml:4:") != NULL, "%s", e.msg);
    cr_expect(strstr(e.msg, "duplx_GBps") != NULL, "%s", e.msg);
    cr_expect(strstr(e.msg, "duplex_GBps") != NULL, "suggests the right key: %s", e.msg);
}

Test(catalog, duplicate_key_names_file_line_key)
{
    err_t e;
    const char *y = "pcie5:\n  h2d_GBps: {value: 55, origin: x}\n  d2h_GBps: {value: 55, origin: x}\n"
                    "  h2d_GBps: {value: 97, origin: x}\n  duplex_GBps: {value: 97, origin: x}\n";
    cr_assert_neq(load_bad(HW_LINK, y, &e), 0);
    cr_expect(strstr(e.msg, "bad.yaml:4:") != NULL, "%s", e.msg);
    cr_expect(strstr(e.msg, "h2d_GBps") != NULL, "%s", e.msg);
}

Test(catalog, negative_bandwidth_names_file_line_key)
{
    err_t e;
    const char *y = "pcie5:\n  h2d_GBps: {value: 55, origin: x}\n  d2h_GBps: {value: -5, origin: x}\n"
                    "  duplex_GBps: {value: 97, origin: x}\n";
    cr_assert_neq(load_bad(HW_LINK, y, &e), 0);
    cr_expect(strstr(e.msg, "bad.yaml:3:") != NULL, "%s", e.msg);
    cr_expect(strstr(e.msg, "d2h_GBps") != NULL, "%s", e.msg);
}

Test(catalog, missing_required_key_names_file_line_key)
{
    err_t e;
    const char *y = "pcie5:\n  h2d_GBps: {value: 55, origin: x}\n  d2h_GBps: {value: 55, origin: x}\n";
    cr_assert_neq(load_bad(HW_LINK, y, &e), 0);
    cr_expect(strstr(e.msg, "bad.yaml:2:") != NULL, "%s", e.msg);
    cr_expect(strstr(e.msg, "raw_GBps") != NULL, "%s", e.msg);
    cr_expect(strstr(e.msg, "pcie5") != NULL, "%s", e.msg);
}

Test(catalog, missing_origin_is_an_error)
{
    err_t e;
    const char *y = "pcie5:\n  h2d_GBps: 55\n  d2h_GBps: {value: 55, origin: x}\n  duplex_GBps: {value: 97, origin: x}\n";
    cr_assert_neq(load_bad(HW_LINK, y, &e), 0);
    cr_expect(strstr(e.msg, "bad.yaml:2:") && strstr(e.msg, "origin"), "%s", e.msg);
}

Test(catalog, llm_shapes)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    cr_expect_float_eq(llm_kv_bytes_per_token(&t.m, LLM_BF16), 144.0 * 1024, 1e-9);
    const char *names[] = {"llama-3.1-8b", "qwen2.5-7b", "llama-3.1-70b", "qwen3-32b"};
    const double kib[] = {128, 56, 320, 256};
    for (int i = 0; i < 4; i++) {
        llm_t m;
        err_t e;
        cr_assert_eq(llm_get(t.llms, names[i], NULL, &m, &e), 0, "%s", e.msg);
        cr_expect_float_eq(llm_kv_bytes_per_token(&m, LLM_BF16), kib[i] * 1024, 1e-9, "%s", names[i]);
        cr_expect_eq(m.head_dim, 128);
        llm_free(&m);
    }
    /* Llama-3.1-70B in bf16 leaves ~9 GiB of an H200 */
    llm_t m;
    err_t e;
    cr_assert_eq(llm_get(t.llms, "llama-3.1-70b", NULL, &m, &e), 0);
    double left = (t.hw.hbm_bytes - llm_weight_bytes(&m, LLM_BF16)) / 1073741824.0;
    cr_expect(left > 0 && left < 10, "left %g GiB", left);
    llm_free(&m);
    cr_expect_eq(llm_get(t.llms, "gpt-5", NULL, &m, &e), ERR_NOTFOUND);
    cr_expect(strstr(e.msg, "qwen3-8b") != NULL, "%s", e.msg);
    th_machine_free(&t);
}

Test(catalog, llm_errors_name_file_line_key)
{
    err_t e;
    llmcat_t *c;
    const char *y = "m:\n  origin: x\n  layers: 2\n  q_heads: 4\n  kv_heads: 2\n  head_dim: 128\n  hidden: 64\n"
                    "  ffn: 128\n  vocab: 1000\n  tied_embeddings: true\n  qk_norm: true\n  klt: false\n  hiden: 64\n";
    cr_assert_neq(llmcat_load_string("llm.yaml", y, &c, &e), 0);
    cr_expect(strstr(e.msg, "llm.yaml:13:") && strstr(e.msg, "hiden"), "%s", e.msg);
}
