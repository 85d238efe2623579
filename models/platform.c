/* platform — a profile's parameters carried to the study's hardware by class (models/platform.h). */
#include "models/platform.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

platform_class_t platform_class(const char *name)
{
    if (!strcmp(name, "h2d_GBps") || !strcmp(name, "d2h_GBps") || !strcmp(name, "duplex_GBps") ||
        !strcmp(name, "ce_latency_us"))
        return PLATFORM_LINK;
    if (!strcmp(name, "gather_peak_GBps")) return PLATFORM_SM_PATH;
    if (strstr(name, "rows_Mps") || !strcmp(name, "gather_warm_rows") || !strcmp(name, "host_page_bytes") ||
        !strcmp(name, "ce2d_page_row_ns") || !strcmp(name, "cebatch_piece_us"))
        return PLATFORM_HOST;
    const char *unit = hwcat_param_unit(name);
    if (!unit || hwcat_param_is_text(name)) return PLATFORM_OTHER;
    /* the catalogs' GPU datasheet, link, tier and box keys are no fitted costs */
    static const char *const presets[] = {"hbm_bytes", "hbm_GBps", "sm_count", "l2_bytes", "bf16_TFLOPS", "fp8_TFLOPS",
                                          "raw_GBps", "cxl_read_GBps", "cxl_write_GBps", "cxl_bytes", "gpus",
                                          "gpus_per_switch", "numa_nodes", "host_dram_bytes", "host_dram_GBps",
                                          "hbm_reserve_bytes"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(name, presets[i])) return PLATFORM_OTHER;
    return PLATFORM_GPU;
}

static int put(calib_t *cal, const char *name, double value, const char *origin, err_t *e)
{
    calib_param_t p = {.name = name, .value = value, .lo = 0, .hi = -1, .origin = origin};
    return calib_set(cal, &p, e);
}

/* Rewrites the origin of an existing parameter "assumed: <why> (<old origin>)". */
static int relabel(calib_t *cal, const calib_param_t *old, const char *why, err_t *e)
{
    if (!strncmp(old->origin, "assumed", 7)) return ERR_OK;
    char origin[1024];
    snprintf(origin, sizeof origin, "assumed: %s (%s)", why, old->origin);
    calib_param_t p = *old;
    p.origin = origin;
    return calib_set(cal, &p, e);
}

/* A value of the profile, else of the preset entry ps (the reference link's, the GPU's). */
static double value_of(const calib_t *cal, const hw_pset_t *ps, const char *name)
{
    const calib_param_t *p = calib_find(cal, name);
    if (p) return p->value;
    const hw_param_t *hp = hw_pset_find(ps, name);
    return hp ? hp->value : NAN;
}

/* The link the profile was measured on: its platform's, else the one link preset with measured peaks. */
static int reference_link(const calib_t *cal, const hwcat_t *cat, const char **out, err_t *e)
{
    const calib_platform_t *pl = calib_platform(cal);
    if (pl) {
        *out = pl->link;
        return hwcat_entry(cat, HW_LINK, pl->link) ? ERR_OK
                                                    : err_set(e, ERR_NOTFOUND, "profile %s: platform link '%s' is no links.yaml preset",
                                                              calib_profile(cal), pl->link);
    }
    *out = NULL;
    for (size_t i = 0; i < hwcat_count(cat, HW_LINK); i++) {
        const char *name = hwcat_name(cat, HW_LINK, i);
        if (!hw_pset_find(hwcat_entry(cat, HW_LINK, name), "h2d_GBps")) continue;
        if (*out) return err_set(e, ERR_NOTFOUND, "profile %s declares no platform and links.yaml has measured peaks for both %s and %s: "
                                 "which one it was measured on is unknown", calib_profile(cal), *out, name);
        *out = name;
    }
    return *out ? ERR_OK : err_set(e, ERR_NOTFOUND, "profile %s declares no platform and no links.yaml preset has measured peaks",
                                   calib_profile(cal));
}

/* Link-class values for hw's link, and the SM path's ceiling that follows them. */
static int link_rule(calib_t *cal, const hwcat_t *cat, const hw_t *hw, const char *ref, err_t *e)
{
    bool own = !strcmp(hw->link, ref);
    if (own && !hw->link_from_box) return ERR_OK;
    const hw_pset_t *rps = hwcat_entry(cat, HW_LINK, ref), *lps = hwcat_entry(cat, HW_LINK, hw->link);
    const hw_param_t *raw_ref = hw_pset_find(rps, "raw_GBps"), *raw = hw_pset_find(lps, "raw_GBps");
    if (!raw_ref || !raw) return err_set(e, ERR_NOTFOUND, "links.yaml: no raw_GBps for '%s'", raw ? ref : hw->link);
    static const char *const keys[3] = {"h2d_GBps", "d2h_GBps", "duplex_GBps"};
    double ref_v[3], new_v[3];
    for (int i = 0; i < 3; i++) ref_v[i] = value_of(cal, rps, keys[i]);
    if (!(ref_v[0] > 0 && ref_v[1] > 0 && ref_v[2] > 0))
        return err_set(e, ERR_NOTFOUND, "profile %s: no h2d_GBps, d2h_GBps and duplex_GBps of its link %s", calib_profile(cal), ref);
    char origin[3][512];
    const hw_pset_t *measured = hw->link_from_box ? &hw->params : hw_pset_find(lps, "h2d_GBps") ? lps : NULL;
    for (int i = 0; i < 3; i++) {
        const hw_param_t *m = measured ? hw_pset_find(measured, keys[i]) : NULL;
        if (m) {
            new_v[i] = m->value;
            snprintf(origin[i], sizeof origin[i], "%s", m->origin);
        } else if (i < 2) {
            double eff = ref_v[i] / raw_ref->value;
            new_v[i] = raw->value * eff;
            snprintf(origin[i], sizeof origin[i], "assumed: %s raw %g GB/s x %.4f, the protocol efficiency measured on %s by %s "
                     "(%.4g GB/s of %g raw)", hw->link, raw->value, eff, ref, calib_profile(cal), ref_v[i], raw_ref->value);
        } else {
            double share = ref_v[2] / (ref_v[0] + ref_v[1]);
            new_v[i] = (new_v[0] + new_v[1]) * share;
            snprintf(origin[i], sizeof origin[i], "assumed: %.4f of both directions' peaks, the duplex share measured on %s by %s",
                     share, ref, calib_profile(cal));
        }
    }
    int rc = ERR_OK;
    for (int i = 0; !rc && i < 3; i++) rc = put(cal, keys[i], new_v[i], origin[i], e);
    char why[512];
    snprintf(why, sizeof why, "the copy engine's setup as measured on %s by %s, applied to %s", ref, calib_profile(cal), hw->link);
    const calib_param_t *lat = calib_find(cal, "ce_latency_us");
    if (!rc && lat) rc = relabel(cal, lat, why, e);
    /* The SM path: the link's share at the SM/copy-engine ratio of the calibration host, under the
     * SM-side limit (blocks in flight x bytes each keeps in flight / round trip). */
    const hw_pset_t *gps = hwcat_entry(cat, HW_GPU, hw->gpu);
    double peak = value_of(cal, gps, "gather_peak_GBps"), blocks = value_of(cal, gps, "gather_blocks"),
           block = value_of(cal, gps, "gather_block_GBps");
    if (rc || !(peak > 0)) return rc;
    double ratio = peak / ref_v[0], link_share = new_v[0] * ratio, sm_limit = blocks * block;
    char o[512];
    snprintf(o, sizeof o, "assumed: min(%s's h2d %.4g GB/s x %.4f, the SM/copy-engine ratio measured on %s by %s; the SM-side limit "
             "%.4g GB/s = gather_blocks %g x gather_block_GBps %.4g, blocks in flight x bytes each keeps in flight / the round trip)%s",
             hw->link, new_v[0], ratio, ref, calib_profile(cal), sm_limit, blocks, block,
             sm_limit < link_share ? ": the SM-side limit binds" : "");
    return put(cal, "gather_peak_GBps", sm_limit < link_share ? sm_limit : link_share, o, e);
}

int platform_apply(calib_t *cal, const hwcat_t *cat, const hw_t *hw, err_t *e)
{
    const char *ref;
    int rc = reference_link(cal, cat, &ref, e);
    if (!rc) rc = link_rule(cal, cat, hw, ref, e);
    const calib_platform_t *pl = calib_platform(cal);
    if (rc || !pl) return rc;
    bool other_gpu = strcmp(pl->gpu, hw->gpu) != 0, other_host = strcmp(pl->host, hw->box) != 0;
    char gpu_why[512], host_why[512];
    snprintf(gpu_why, sizeof gpu_why, "fitted on %s by %s, applied to %s", pl->gpu, calib_profile(cal), hw->gpu);
    snprintf(host_why, sizeof host_why, "the host platform's, measured on %s (%s) by %s, applied to %s", pl->host,
             pl->virtualisation, calib_profile(cal), hw->box);
    for (size_t i = 0; !rc && i < calib_count(cal); i++) {
        const calib_param_t *p = calib_at(cal, i);
        platform_class_t k = platform_class(p->name);
        if (k == PLATFORM_GPU && other_gpu) rc = relabel(cal, p, gpu_why, e);
        else if (k == PLATFORM_HOST && other_host) rc = relabel(cal, p, host_why, e);
    }
    return rc;
}
