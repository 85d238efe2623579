#include "models/hwinst.h"

#include <stdio.h>

static int add_res(sim_t *sim, calib_t *cal, const char *name, const char *param, double scale,
                   const char *unit, err_t *e)
{
    double v = 0;
    int rc = calib_get(cal, param, &v, e);
    if (rc) return rc;
    sim_res_t id;
    return sim_res_add(sim, name, v * scale, unit, &id, e);
}

int hwinst_switch_of(const hw_t *hw, int gpu)
{
    return hw->gpus_per_switch > 1 ? gpu / hw->gpus_per_switch : -1;
}

int hwinst_build(const hw_t *hw, calib_t *cal, sim_t *sim, err_t *e)
{
    char name[64];
    sim_pool_t pool;
    int rc = ERR_OK;
    for (int g = 0; !rc && g < hw->gpus; g++) {
        static const struct { const char *suffix, *param, *unit; double scale; } per_gpu[] = {
            {"h2d", "h2d_GBps", "B/s", 1e9},           {"d2h", "d2h_GBps", "B/s", 1e9},
            {"duplex", "duplex_GBps", "B/s", 1e9},     {"hbm", "hbm_GBps", "B/s", 1e9},
            {"flops_bf16", "bf16_TFLOPS", "FLOP/s", 1e12}, {"sm", "sm_count", "SM", 1},
        };
        for (size_t i = 0; !rc && i < sizeof per_gpu / sizeof per_gpu[0]; i++) {
            snprintf(name, sizeof name, "gpu%d.%s", g, per_gpu[i].suffix);
            rc = add_res(sim, cal, name, per_gpu[i].param, per_gpu[i].scale, per_gpu[i].unit, e);
        }
        const calib_param_t *fp8 = calib_find(cal, "fp8_TFLOPS");
        if (!rc && fp8 && fp8->value > 0) {
            snprintf(name, sizeof name, "gpu%d.flops_fp8", g);
            rc = add_res(sim, cal, name, "fp8_TFLOPS", 1e12, "FLOP/s", e);
        }
        /* The rate at which one GPU's zero-copy reads of host rows are served is a pool the gathers
         * share (two gathers at once split it, as measured), so it is a resource, not a cap. */
        snprintf(name, sizeof name, "gpu%d.rows", g);
        if (!rc) rc = sim_res_add(sim, name, 1.0, "row share", NULL, e);
        /* Each direction's copy engine serves the GPU's copies in turns (measured: streams issuing
         * small copies take turns, DESIGN.md "Copy engines"): a resource of one engine-second per
         * second that every copy-engine op holds for its time alone (processor sharing). */
        snprintf(name, sizeof name, "gpu%d.ce_h2d", g);
        if (!rc) rc = sim_res_add(sim, name, 1.0, "engine share", NULL, e);
        snprintf(name, sizeof name, "gpu%d.ce_d2h", g);
        if (!rc) rc = sim_res_add(sim, name, 1.0, "engine share", NULL, e);
        snprintf(name, sizeof name, "gpu%d.hbm_mem", g);
        if (!rc) rc = sim_pool_add(sim, name, hw->hbm_bytes - hw->hbm_reserve_bytes, &pool, e);
    }
    int switches = hw->gpus_per_switch > 1 ? (hw->gpus + hw->gpus_per_switch - 1) / hw->gpus_per_switch : 0;
    for (int s = 0; !rc && s < switches; s++) {
        snprintf(name, sizeof name, "switch%d.up_h2d", s);
        rc = add_res(sim, cal, name, "h2d_GBps", 1e9, "B/s", e);
        snprintf(name, sizeof name, "switch%d.up_d2h", s);
        if (!rc) rc = add_res(sim, cal, name, "d2h_GBps", 1e9, "B/s", e);
    }
    if (!rc) rc = add_res(sim, cal, "host.dram", "host_dram_GBps", 1e9, "B/s", e);
    if (!rc) rc = sim_pool_add(sim, "host.dram_mem", hw->host_dram_bytes, &pool, e);
    if (!rc && hw->tier) {
        rc = add_res(sim, cal, "cxl.read", "cxl_read_GBps", 1e9, "B/s", e);
        if (!rc) rc = add_res(sim, cal, "cxl.write", "cxl_write_GBps", 1e9, "B/s", e);
        if (!rc) rc = sim_pool_add(sim, "cxl.mem", hw->cxl_bytes, &pool, e);
    }
    return rc;
}

int hwinst_res(const sim_t *sim, const char *name, sim_res_t *out, err_t *e)
{
    *out = sim_res_find(sim, name);
    return *out < 0 ? err_set(e, ERR_NOTFOUND, "no resource '%s' in the simulator (hardware not instantiated?)", name)
                    : ERR_OK;
}

static int path(const hw_t *hw, const sim_t *sim, int gpu, hwinst_src_t src, bool h2d, double duplex_coef,
                plan_use_t *uses, uint8_t *n, err_t *e)
{
    if (src == HWINST_CXL && !hw->tier) return err_set(e, ERR_INVAL, "hardware '%s' has no memory tier", hw->box);
    char names[5][64];
    int k = 0;
    snprintf(names[k++], 64, "%s", src == HWINST_CXL ? (h2d ? "cxl.read" : "cxl.write") : "host.dram");
    int s = hwinst_switch_of(hw, gpu);
    if (s >= 0) snprintf(names[k++], 64, "switch%d.%s", s, h2d ? "up_h2d" : "up_d2h");
    snprintf(names[k++], 64, "gpu%d.%s", gpu, h2d ? "h2d" : "d2h");
    snprintf(names[k++], 64, "gpu%d.duplex", gpu);
    snprintf(names[k++], 64, "gpu%d.hbm", gpu);
    for (int i = 0; i < k; i++) {
        int rc = hwinst_res(sim, names[i], &uses[i].res, e);
        if (rc) return rc;
        uses[i].coef = (i == k - 2) ? duplex_coef : 1.0;
    }
    *n = (uint8_t)k;
    return ERR_OK;
}

int hwinst_path_h2d(const hw_t *hw, const sim_t *sim, int gpu, hwinst_src_t src, double duplex_coef,
                    plan_use_t *uses, uint8_t *n, err_t *e)
{
    return path(hw, sim, gpu, src, true, duplex_coef, uses, n, e);
}

int hwinst_path_d2h(const hw_t *hw, const sim_t *sim, int gpu, hwinst_src_t src, plan_use_t *uses,
                    uint8_t *n, err_t *e)
{
    return path(hw, sim, gpu, src, false, 1.0, uses, n, e);
}
