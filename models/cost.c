#include "models/cost.h"

#include "models/method_ops.h"
#include "models/opkind.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

sim_ps_t cost_ps(double seconds) { return sim_ps_or_never(seconds); }

int cost_scan_family(const char *name)
{
    size_t n = strlen(name);
    for (int pass = 0; pass < 2; pass++) {   /* the name as it is, then without its trailing digits */
        for (int i = 0; i < method_scan_family_count(); i++) {
            const char *f = method_scan_family_name(i);
            if (strlen(f) == n && !strncmp(f, name, n)) return i;
        }
        while (n > 0 && name[n - 1] >= '0' && name[n - 1] <= '9') n--;
    }
    return -1;
}

int cost_scan_form(int family, const char *form)
{
    const char *f = method_scan_family_name(family);
    if (!f || strchr(f, '_')) return -1;
    if (!form || !*form) return family;
    char name[64];
    snprintf(name, sizeof name, "%s_%s", f, form);
    return cost_scan_family(name);
}

/* Reads a fixed time and an efficiency by the names in names[2], falling back to the names in
 * fallback[2] where the catalogs declare no such parameters (names is rewritten to what was read). */
static int pair_get(calib_t *cal, char names[2][40], const char *fallback0, const char *fallback1, double *lat_s,
                    double *eff, err_t *e)
{
    if (!hwcat_param_unit(names[0]) || !hwcat_param_unit(names[1])) {
        snprintf(names[0], 40, "%s", fallback0);
        snprintf(names[1], 40, "%s", fallback1);
    }
    int rc = calib_get(cal, names[0], lat_s, e);
    if (!rc) rc = calib_get(cal, names[1], eff, e);
    *lat_s *= 1e-6;
    return rc;
}

/* Each kernel kind's fixed time and efficiency: its own parameters where the catalogs declare them
 * (and the profile then has them: calib_seed), else kernel_latency_us and kernel_mem_eff; each scan
 * family's, else the scan kind's. */
static int kinds_init(cost_t *c, calib_t *cal, err_t *e)
{
    for (int k = 0; k < OPKIND_COUNT; k++) {
        snprintf(c->kind_names[k][0], 40, "%s_latency_us", opkind_name(k));
        snprintf(c->kind_names[k][1], 40, "%s_mem_eff", opkind_name(k));
        int rc = pair_get(cal, c->kind_names[k], "kernel_latency_us", "kernel_mem_eff", &c->kind_latency_s[k],
                          &c->kind_mem_eff[k], e);
        if (rc) return rc;
    }
    const char(*scan)[40] = c->kind_names[OPKIND_SCAN];
    for (int f = 0; f < method_scan_family_count(); f++) {
        const char *family = method_scan_family_name(f);
        snprintf(c->scan_names[f][0], 40, "scan_%s_latency_us", family);
        snprintf(c->scan_names[f][1], 40, "scan_%s_mem_eff", family);
        int rc = pair_get(cal, c->scan_names[f], scan[0], scan[1], &c->scan_latency_s[f], &c->scan_mem_eff[f], e);
        if (rc) return rc;
        /* over an index in L2: the family's own pair until one is fitted (a profile from runs without
         * such rows, or from before them, holds the catalogs' presets) */
        snprintf(c->scan_fill_names[f], 40, "scan_%s_fill_bytes", family);
        const calib_param_t *fill = calib_find(cal, c->scan_fill_names[f]);
        c->scan_fill_bytes[f] = fill ? fill->value : 0;
        snprintf(c->scan_bit_names[f], 40, "scan_%s_bit_ns", family);
        const calib_param_t *bit = hwcat_param_unit(c->scan_bit_names[f]) ? calib_find(cal, c->scan_bit_names[f]) : NULL;
        c->scan_bit_s[f] = bit ? bit->value * 1e-9 : 0;
        snprintf(c->scan_l2_names[f][0], 40, "scan_%s_l2_latency_us", family);
        snprintf(c->scan_l2_names[f][1], 40, "scan_%s_l2_mem_eff", family);
        const calib_param_t *l2 = calib_find(cal, c->scan_l2_names[f][0]);
        if (!l2 || !l2->origin || !strncmp(l2->origin, "assumed", 7)) {
            memcpy(c->scan_l2_names[f], c->scan_names[f], sizeof c->scan_names[f]);
            c->scan_l2_latency_s[f] = c->scan_latency_s[f];
            c->scan_l2_mem_eff[f] = c->scan_mem_eff[f];
        } else {
            rc = pair_get(cal, c->scan_l2_names[f], c->scan_names[f][0], c->scan_names[f][1], &c->scan_l2_latency_s[f],
                          &c->scan_l2_mem_eff[f], e);
            if (rc) return rc;
        }
    }
    return ERR_OK;
}

int cost_init(cost_t *c, calib_t *cal, err_t *e)
{
    /* the hardware facts it needs, declared with the presets (models/hwcat.c) */
    static const struct { const char *name; size_t off; double scale; } facts[] = {
#define F(n, field, s) {n, offsetof(cost_t, field), s}
        F("h2d_GBps", h2d_Bps, 1e9), F("d2h_GBps", d2h_Bps, 1e9), F("hbm_GBps", hbm_Bps, 1e9),
        F("bf16_TFLOPS", bf16_flops, 1e12), F("fp8_TFLOPS", fp8_flops, 1e12), F("sm_count", sm_count, 1),
        F("l2_bytes", l2_bytes, 1),
#undef F
    };
    memset(c, 0, sizeof *c);
    c->cal = cal;
    for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++) {
        double v = 0;
        int rc = calib_get(cal, facts[i].name, &v, e);
        if (rc) return rc;
        *(double *)((char *)c + facts[i].off) = v * facts[i].scale;
    }
    for (size_t i = 0; i < cost_param_count; i++) {
        const hw_param_def_t *d = &cost_param_defs[i];
        double v = 0;
        if (d->field < 0) continue;
        int rc = calib_get(cal, d->key, &v, e);
        if (rc) return rc;
        *(double *)((char *)c + d->field) = v * d->scale;
    }
    const calib_param_t *fp32 = calib_find(cal, "fp32_TFLOPS");   /* optional: only FP32 kernels need it */
    c->fp32_flops = fp32 ? fp32->value * 1e12 : 0;
    c->l2_dirty_bytes *= c->l2_bytes;     /* both declared as fractions: they scale with the GPU */
    c->l2_writeback_Bps *= c->hbm_Bps;
    return kinds_init(c, cal, e);
}

int cost_paths_resolve(const cost_t *c, const hw_t *hw, const sim_t *sim, int gpu, hwinst_src_t src,
                       cost_paths_t *out, err_t *e)
{
    char name[64];
    memset(out, 0, sizeof *out);
    snprintf(name, sizeof name, "gpu%d.hbm", gpu);
    int rc = hwinst_res(sim, name, &out->hbm, e);
    snprintf(name, sizeof name, "gpu%d.flops_bf16", gpu);
    if (!rc) rc = hwinst_res(sim, name, &out->flops_bf16, e);
    snprintf(name, sizeof name, "gpu%d.flops_fp8", gpu);
    out->flops_fp8 = sim_res_find(sim, name);
    snprintf(name, sizeof name, "gpu%d.rows", gpu);
    if (!rc) rc = hwinst_res(sim, name, &out->rows, e);
    snprintf(name, sizeof name, "gpu%d.sm", gpu);
    if (!rc) rc = hwinst_res(sim, name, &out->sm, e);
    snprintf(name, sizeof name, "gpu%d.ce_h2d", gpu);
    out->ce_h2d = sim_res_find(sim, name);
    snprintf(name, sizeof name, "gpu%d.ce_d2h", gpu);
    out->ce_d2h = sim_res_find(sim, name);
    if (!rc) rc = hwinst_path_h2d(hw, sim, gpu, src, 1.0, out->h2d, &out->n_h2d, e);
    if (!rc) rc = hwinst_path_h2d(hw, sim, gpu, src, c->gather_duplex_coef, out->gather, &out->n_gather, e);
    if (!rc) rc = hwinst_path_d2h(hw, sim, gpu, src, out->d2h, &out->n_d2h, e);
    return rc;
}

static void set_uses(plan_op_t *op, const plan_use_t *u, uint8_t n)
{
    memcpy(op->uses, u, n * sizeof *u);
    op->n_uses = n;
}


/* The knot of `knots` (n of them, ascending) at or below x (0 below the first, the last past it),
 * and in *f where x lies between it and the next on a log scale (0 outside them). */
static int knot_at(const double *knots, int n, double x, double *f)
{
    int i = 0;
    while (i + 1 < n && x >= knots[i + 1]) i++;
    *f = (x <= knots[0] || i == n - 1) ? 0 : log(x / knots[i]) / log(knots[i + 1] / knots[i]);
    return i;
}

/* The rate r[i] at knot i, or log-linearly a share f of the way to knot i + 1. */
static double knots_rate(const double *r, int i, double f)
{
    return f > 0 ? exp(log(r[i]) + f * (log(r[i + 1]) - log(r[i]))) : r[i];
}

static double rows_cold_per_s(const cost_t *c, double region_bytes, cost_rows_t table);
static void note_row_knots(const cost_t *c, cost_rows_t table, double region_bytes, double piece);

double cost_knots_rate(const double *knots, const double *rates, int n, double x)
{
    double f;
    int i = knot_at(knots, n, x, &f);
    return knots_rate(rates, i, f);
}

/* Rows per second of a plane sweep of the given piece row (cost_plane_piece_bytes) at region_bytes. */
static double plane_rows_per_s(const cost_t *c, int piece, double region_bytes)
{
    return cost_knots_rate(cost_plane_knot_bytes, c->plane_rows_ps[piece], COST_PLANE_KNOTS, region_bytes);
}

double cost_plane_row_s(const cost_t *c, double region_bytes, double piece_bytes)
{
    const double *p = cost_plane_piece_bytes, last = cost_plane_knot_bytes[COST_PLANE_KNOTS - 1];
    double w = fmin(fmax((piece_bytes - p[0]) / (p[1] - p[0]), 0), 1);
    double t = (1 - w) / plane_rows_per_s(c, 0, region_bytes) + w / plane_rows_per_s(c, 1, region_bytes);
    /* past the sweep's last region, as rows in any order slow from there on (measured to 16 GiB);
     * clamped (calib_clamp), at the last region */
    bool clamp = calib_clamped(c->cal, cost_plane_names[0][COST_PLANE_KNOTS - 1]) |
                 calib_clamped(c->cal, cost_plane_names[1][COST_PLANE_KNOTS - 1]);
    if (region_bytes > last && !clamp) t *= rows_cold_per_s(c, last, COST_ROWS_ANY) / rows_cold_per_s(c, region_bytes, COST_ROWS_ANY);
    return t;
}

/* Notes the plane sweep's knots a prefix row of piece_bytes over region_bytes read. */
static void note_plane_knots(const cost_t *c, double region_bytes, double piece_bytes)
{
    double f;
    int k = knot_at(cost_plane_knot_bytes, COST_PLANE_KNOTS, region_bytes, &f);
    for (int p = 0; p < COST_PLANE_PIECES; p++) {
        bool used = p == 0 ? piece_bytes < cost_plane_piece_bytes[1] : piece_bytes > cost_plane_piece_bytes[0];
        if (!used) continue;
        calib_note(c->cal, cost_plane_names[p][k], piece_bytes);
        if (f > 0) calib_note(c->cal, cost_plane_names[p][k + 1], piece_bytes);
        if (region_bytes > cost_plane_knot_bytes[COST_PLANE_KNOTS - 1])
            calib_note_outside(c->cal, cost_plane_names[p][COST_PLANE_KNOTS - 1]);
    }
    if (region_bytes > cost_plane_knot_bytes[COST_PLANE_KNOTS - 1])
        note_row_knots(c, COST_ROWS_ANY, region_bytes, piece_bytes);
}

/* The knot at or below region_bytes (0 below the first, the last past it). */
static int row_knot(double region_bytes)
{
    double f;
    return knot_at(cost_row_knot_bytes, COST_ROW_KNOTS, region_bytes, &f);
}

static double rows_cold_per_s(const cost_t *c, double region_bytes, cost_rows_t table)
{
    return cost_knots_rate(cost_row_knot_bytes, c->gather_rows_ps[table], COST_ROW_KNOTS, region_bytes);
}

double cost_gather_cold_share(const cost_t *c, double rows)
{
    /* a count of translations (INFINITY: none kept) clamped where calib_clamp asks */
    double x = log2((isfinite(rows) ? calib_x(c->cal, "gather_warm_rows", rows) : rows) / c->gather_warm_rows);
    return !(x > 0) ? 0 : x >= 1 ? 1 : x;
}

double cost_gather_rows_per_s(const cost_t *c, double region_bytes, double translations, cost_rows_t table)
{
    double cold = table == COST_ROWS_HEADS_NEW ? 1.0 : cost_gather_cold_share(c, translations);
    return 1.0 / ((1.0 - cold) / c->gather_rows_ps[COST_ROWS_ANY][0] + cold / rows_cold_per_s(c, region_bytes, table));
}

cost_rows_t cost_gather_table(const cost_t *c, cost_xfer_t form, double bytes, cost_gather_at_t at)
{
    bool pt = at == COST_GATHER_ALONE && bytes <= c->l2_bytes, heads = form == COST_SM_HEADS;
    if (form == COST_SM_HEADS_NEW) return COST_ROWS_HEADS_NEW;
    if (at == COST_GATHER_AFTER) return heads ? COST_ROWS_HEADS_AFTER : COST_ROWS_ANY_AFTER;
    if (heads) return pt ? COST_ROWS_HEADS_PT : COST_ROWS_HEADS;
    return pt ? COST_ROWS_ANY_PT : COST_ROWS_ANY;
}

/* A kernel running alone at alone_rate (units of its work per second) fills the GPU's SMs. */
static void sm_share(const cost_t *c, const cost_paths_t *p, double alone_rate, plan_op_t *op)
{
    if (alone_rate > 0 && isfinite(alone_rate) && op->n_uses < PLAN_MAX_USES)
        op->uses[op->n_uses++] = (plan_use_t){p->sm, c->sm_count / alone_rate};
}

double cost_gather_translations(const cost_t *c, double pieces, double region_bytes)
{
    double pages = region_bytes > 0 ? ceil(region_bytes / c->host_page_bytes) : INFINITY;
    return fmin(fmax(pieces, 1.0), pages);
}

static bool sm_form(cost_xfer_t form)
{
    return form == COST_SM_GATHER || form == COST_SM_HEADS || form == COST_SM_HEADS_NEW || form == COST_SM_PREFIX ||
           form == COST_SM_ZC_SCAN;
}

/* Notes the knots of `table` an SM gather of `piece`-byte rows over region_bytes read. */
static void note_row_knots(const cost_t *c, cost_rows_t table, double region_bytes, double piece)
{
    const char *const *names = cost_row_names[table];
    int k = row_knot(region_bytes), last = COST_ROW_KNOTS - 1;
    calib_note(c->cal, names[k], piece);
    if (k < last && region_bytes > cost_row_knot_bytes[0]) calib_note(c->cal, names[k + 1], piece);
    if (region_bytes > cost_row_knot_bytes[last]) calib_note_outside(c->cal, names[last]);
}

/* Rows per second of a step's gather head by head whose GPU keeps `translations` (its own rows'
 * and the step's other gathers'): the warm share at the _shuffle table, the rest cold. */
static double step_heads_rows_per_s(const cost_t *c, double region_bytes, double translations)
{
    double cold = cost_gather_cold_share(c, translations);
    return 1.0 / ((1.0 - cold) / rows_cold_per_s(c, region_bytes, COST_ROWS_HEADS_SHUFFLE) +
                  cold / rows_cold_per_s(c, region_bytes, COST_ROWS_HEADS));
}

/* An SM gather (cost_transfer's forms on the SMs) run `at`, its rows warm while the GPU keeps `tlb`
 * address translations (INFINITY: all cold); with `at` COST_GATHER_AFTER the share `evicted` of its
 * rows (0..1) cold at the _after tables, the rest as in a step (`evicted` is read only then). */
static void sm_transfer(const cost_t *c, const cost_paths_t *p, cost_xfer_t form, double bytes, double pieces,
                        double region_bytes, cost_gather_at_t at, double evicted, double tlb, plan_op_t *op)
{
    double piece = bytes / pieces;
    bool prefix = form == COST_SM_PREFIX || form == COST_SM_ZC_SCAN;
    double eff = prefix ? c->prefix_eff * (form == COST_SM_ZC_SCAN ? c->zc_scan_eff : 1.0) : 1.0;
    op->exec = PLAN_EXEC_GPU;
    set_uses(op, p->gather, p->n_gather);
    double blocks_rate = c->gather_blocks * c->gather_block_Bps;
    double e = at == COST_GATHER_AFTER ? fmin(fmax(evicted, 0), 1) : 0;
    cost_rows_t after = cost_gather_table(c, form, bytes, COST_GATHER_AFTER);
    cost_rows_t kept = cost_gather_table(c, form, bytes, at == COST_GATHER_AFTER ? COST_GATHER_STEP : at);
    bool step_heads = at != COST_GATHER_ALONE && kept == COST_ROWS_HEADS;
    double per_row_s;
    if (prefix) {   /* a sweep: its own passes keep or lose its translations, wherever it runs */
        per_row_s = cost_plane_row_s(c, region_bytes, piece);
    } else {
        double kept_rate = step_heads ? step_heads_rows_per_s(c, region_bytes, tlb)
                                      : cost_gather_rows_per_s(c, region_bytes, at == COST_GATHER_ALONE ? tlb : INFINITY, kept);
        per_row_s = (e > 0 ? e / cost_gather_rows_per_s(c, region_bytes, INFINITY, after) : 0) +
                    (e < 1 ? (1 - e) / kept_rate : 0);
    }
    /* a sweep's rows go at the sweep's rate as measured: the fetch reads past the cliff at least as
     * many rows a second as the sweep (run h200-1121-sweep (git history, before e518637), h200-1223-plane), so its
     * efficiencies, fitted where bytes bind, scale the byte ceilings only */
    double rows_rate = prefix ? piece / per_row_s : piece * eff / per_row_s;
    op->cost.cap_rate = fmin(c->gather_peak_Bps, blocks_rate) * eff;
    if (op->n_uses < PLAN_MAX_USES) op->uses[op->n_uses++] = (plan_use_t){p->rows, 1.0 / rows_rate};
    /* the SMs a gather holds scale with its rate against what the SMs alone allow: one slowed
     * by the row rate leaves room for other kernels */
    sm_share(c, p, fmin(op->cost.cap_rate, c->h2d_Bps), op);
    op->cost.latency_ps = cost_ps(prefix ? c->prefix_latency_s : c->gather_latency_s);
    op->weight = c->gather_weight;
    op->launch_ps = cost_ps(c->launch_s);
    /* note what shaped the prediction: the binding ceiling among the three, and the rest */
    if (op->cost.cap_rate == c->gather_peak_Bps * eff) calib_note(c->cal, "gather_peak_GBps", piece);
    if (op->cost.cap_rate == blocks_rate * eff) {
        calib_note(c->cal, "gather_block_GBps", c->gather_blocks);
        calib_note(c->cal, "gather_blocks", NAN);
    }
    if (rows_rate < op->cost.cap_rate && prefix) {
        note_plane_knots(c, region_bytes, piece);
    } else if (rows_rate < op->cost.cap_rate) {
        if (e > 0) note_row_knots(c, after, region_bytes, piece);
        if (e < 1) note_row_knots(c, kept, region_bytes, piece);
        /* in a step, noted where some rows stay warm (past twice gather_warm_rows the value no longer matters) */
        bool warm = e < 1 && isfinite(tlb) &&
                    (at == COST_GATHER_ALONE ? kept != COST_ROWS_HEADS_NEW : step_heads && cost_gather_cold_share(c, tlb) < 1);
        if (warm && step_heads) note_row_knots(c, COST_ROWS_HEADS_SHUFFLE, region_bytes, piece);
        else calib_note(c->cal, cost_row_names[COST_ROWS_ANY][0], piece);   /* the warm rows' rate */
        if (warm) {
            calib_note(c->cal, "gather_warm_rows", tlb);
            calib_note(c->cal, "host_page_bytes", NAN);
        }
    }
    calib_note(c->cal, prefix ? "prefix_gather_latency_us" : "gather_latency_us", NAN);
    if (prefix) calib_note(c->cal, "prefix_gather_eff", bytes);
    if (form == COST_SM_ZC_SCAN) calib_note(c->cal, "zc_scan_eff", bytes);
    calib_note(c->cal, "gather_weight", NAN);
    calib_note(c->cal, "gather_duplex_coef", NAN);
    calib_note(c->cal, "launch_us", NAN);
}

/* The pieces (at least 1) of a transfer of `bytes`, set on op with its work; its ceiling unset. */
static double xfer_begin(double bytes, double pieces, plan_op_t *op)
{
    if (pieces < 1) pieces = 1;
    op->pieces = (uint32_t)fmin(pieces, 4294967295.0);
    op->cost.work = bytes;
    op->cost.cap_rate = 0;
    return pieces;
}

void cost_transfer_after(const cost_t *c, const cost_paths_t *p, cost_xfer_t form, double bytes, double pieces,
                         double region_bytes, double evicting, double step_translations, plan_op_t *op)
{
    double share = cost_gather_cold_share(c, evicting);
    if (!sm_form(form) || !(share > 0)) {
        cost_transfer_step(c, p, form, bytes, pieces, region_bytes, step_translations, op);
        return;
    }
    pieces = xfer_begin(bytes, pieces, op);
    sm_transfer(c, p, form, bytes, pieces, region_bytes, COST_GATHER_AFTER, share, step_translations, op);
    calib_note(c->cal, "gather_warm_rows", evicting);
    calib_note(c->cal, "host_page_bytes", NAN);
}

void cost_transfer_step(const cost_t *c, const cost_paths_t *p, cost_xfer_t form, double bytes, double pieces,
                        double region_bytes, double step_translations, plan_op_t *op)
{
    if (!sm_form(form)) {
        cost_transfer(c, p, form, true, bytes, pieces, region_bytes, COST_GATHER_STEP, op);
        return;
    }
    pieces = xfer_begin(bytes, pieces, op);
    sm_transfer(c, p, form, bytes, pieces, region_bytes, COST_GATHER_STEP, 0, step_translations, op);
}

/* A direction's copy engine serves the GPU's copies in turns: a copy-engine op running alone at
 * rate_Bps holds the engine for all of its time, so it consumes 1/rate_Bps engine-seconds per byte,
 * and copies of several streams or sessions share the engine's time (their per-piece costs add up,
 * as measured) where the link's fluid shares alone would overlap them. */
static void ce_engine_use(const cost_paths_t *p, bool h2d, double rate_Bps, plan_op_t *op)
{
    sim_res_t r = h2d ? p->ce_h2d : p->ce_d2h;
    if (r < 0 || !(rate_Bps > 0) || op->n_uses >= PLAN_MAX_USES) return;
    op->uses[op->n_uses++] = (plan_use_t){r, 1.0 / rate_Bps};
}

void cost_transfer(const cost_t *c, const cost_paths_t *p, cost_xfer_t form, bool h2d, double bytes,
                   double pieces, double region_bytes, cost_gather_at_t at, plan_op_t *op)
{
    pieces = xfer_begin(bytes, pieces, op);
    double piece = bytes / pieces;
    if (sm_form(form)) {
        double tlb = at == COST_GATHER_ALONE ? cost_gather_translations(c, pieces, region_bytes) : INFINITY;
        sm_transfer(c, p, form, bytes, pieces, region_bytes, at, 1.0, tlb, op);
        return;
    }
    op->exec = h2d ? PLAN_EXEC_COPY_H2D : PLAN_EXEC_COPY_D2H;
    if (h2d) set_uses(op, p->h2d, p->n_h2d);
    else set_uses(op, p->d2h, p->n_d2h);
    double peak = h2d ? c->h2d_Bps : c->d2h_Bps;
    double t_piece = 0, counted = pieces;   /* the pieces t_piece is paid for */
    if (form == COST_CE_BATCH) {
        t_piece = c->cebatch_piece_s;
        calib_note(c->cal, "cebatch_piece_us", piece);
    } else if (form == COST_CE_STRIDED) {
        t_piece = c->ce2d_page_row_s;
        counted = calib_x(c->cal, "ce2d_page_row_ns", pieces);
        calib_note(c->cal, "ce2d_page_row_ns", pieces);
    } else if (pieces > 1) {
        t_piece = c->ce2d_row_s;
        /* rows of a 2D copy: noted where the row cost could matter (rows up to 1 MiB) */
        if (piece <= 1048576) calib_note(c->cal, "ce2d_row_ns", piece);
    }
    if (t_piece > 0 && bytes > 0) op->cost.cap_rate = bytes / (counted * t_piece + bytes / peak);
    ce_engine_use(p, h2d, op->cost.cap_rate > 0 ? op->cost.cap_rate : peak, op);
    op->cost.latency_ps = cost_ps(c->ce_latency_s);
    op->weight = c->ce_weight;
    op->launch_ps = cost_ps(c->copy_launch_s);
    calib_note(c->cal, "ce_latency_us", bytes);
    calib_note(c->cal, "ce_weight", NAN);
    calib_note(c->cal, "copy_launch_us", NAN);
    calib_note(c->cal, h2d ? "h2d_GBps" : "d2h_GBps", NAN);
}

void cost_ce_chain(const cost_t *c, const cost_paths_t *p, bool h2d, double bytes, double copies, plan_op_t *op)
{
    copies = fmax(copies, 1);
    cost_transfer(c, p, COST_CE, h2d, bytes, 1, 0, COST_GATHER_STEP, op);
    op->pieces = (uint32_t)fmin(copies, 4294967295.0);
    /* the gaps between the copies are the engine's time too: a rate cap, not a fixed latency */
    double peak = h2d ? c->h2d_Bps : c->d2h_Bps, gaps = calib_x(c->cal, "ce_b2b_gap_us", copies) - 1;
    sim_res_t r = h2d ? p->ce_h2d : p->ce_d2h;
    if (copies > 1 && bytes > 0 && r >= 0 && op->n_uses && op->uses[op->n_uses - 1].res == r) {
        op->cost.cap_rate = bytes / (gaps * c->ce_b2b_gap_s + bytes / peak);
        op->n_uses--;
        ce_engine_use(p, h2d, op->cost.cap_rate, op);
        op->cost.latency_ps = cost_ps(c->ce_latency_s);
    } else
        op->cost.latency_ps = cost_ps(c->ce_latency_s + gaps * c->ce_b2b_gap_s);
    if (copies > 1) calib_note(c->cal, "ce_b2b_gap_us", copies);
}

int cost_compute_fp32(const cost_t *c, const cost_paths_t *p, double flops, plan_op_t *op, err_t *e)
{
    if (!(c->fp32_flops > 0)) return err_set(e, ERR_NOTFOUND, "an FP32 compute kernel needs the GPU's fp32_TFLOPS (gpus.yaml or the profile)");
    op->exec = PLAN_EXEC_GPU;
    op->n_uses = 0;
    op->cost = (plan_cost_t){.work = fmax(flops, 0), .cap_rate = c->fp32_flops,
                             .latency_ps = cost_ps(c->kind_latency_s[OPKIND_COMPUTE])};
    sm_share(c, p, c->fp32_flops, op);
    op->weight = 1.0;
    op->launch_ps = cost_ps(c->launch_s);
    calib_note(c->cal, c->kind_names[OPKIND_COMPUTE][0], NAN);
    calib_note(c->cal, "fp32_TFLOPS", NAN);
    calib_note(c->cal, "launch_us", NAN);
    return ERR_OK;
}

/* A kernel with fixed time lat_s and HBM efficiency eff (the parameters named names). */
/* fill_bytes > bytes (a scan whose grid falls short of the GPU): the bytes move at the rate that
 * takes as long as fill_bytes would, noted under fill_name. */
static void kernel_op(const cost_t *c, const cost_paths_t *p, double lat_s, double eff,
                      const char (*names)[40], double bytes, double flops, llm_dtype_t t, double fill_bytes,
                      const char *fill_name, plan_op_t *op)
{
    sim_res_t fr = (t == LLM_FP8 && p->flops_fp8 >= 0) ? p->flops_fp8 : p->flops_bf16;
    op->exec = PLAN_EXEC_GPU;
    op->n_uses = 0;
    if (bytes > 0) {
        op->cost.work = bytes;
        op->uses[op->n_uses++] = (plan_use_t){p->hbm, 1.0 / eff};
        if (flops > 0) op->uses[op->n_uses++] = (plan_use_t){fr, flops / bytes / c->kernel_compute_eff};
    } else if (flops > 0) {
        op->cost.work = flops;
        op->uses[op->n_uses++] = (plan_use_t){fr, 1.0 / c->kernel_compute_eff};
    } else {
        op->cost.work = 0;
    }
    double peak = (t == LLM_FP8 && c->fp8_flops > 0) ? c->fp8_flops : c->bf16_flops;
    double flops_rate = peak * c->kernel_compute_eff;
    bool short_grid = bytes > 0 && fill_bytes > bytes;
    double byte_rate = c->hbm_Bps * eff * (short_grid ? bytes / fill_bytes : 1);
    if (bytes > 0) sm_share(c, p, fmin(byte_rate, flops > 0 ? flops_rate * bytes / flops : INFINITY), op);
    else if (flops > 0) sm_share(c, p, flops_rate, op);
    op->cost.cap_rate = short_grid ? byte_rate : 0;
    op->cost.latency_ps = cost_ps(lat_s);
    op->weight = 1.0;
    op->launch_ps = cost_ps(c->launch_s);
    /* noted where they shape the time: the byte term past 1% of it, the FLOP term within half of the
     * byte term (where it could bind) */
    double t_bytes = bytes > 0 ? bytes / byte_rate : 0, t_flops = flops > 0 ? flops / flops_rate : 0;
    calib_note(c->cal, names[0], NAN);
    if (t_bytes > 0.01 * (lat_s + fmax(t_bytes, t_flops))) calib_note(c->cal, names[1], NAN);
    if (short_grid) calib_note(c->cal, fill_name, bytes);
    if (t_flops > 0.5 * t_bytes) calib_note(c->cal, "kernel_compute_eff", NAN);
    calib_note(c->cal, "launch_us", NAN);
}

void cost_kernel(const cost_t *c, const cost_paths_t *p, int kind, double bytes, double flops, llm_dtype_t t,
                 plan_op_t *op)
{
    int k = kind >= 0 && kind < OPKIND_COUNT ? kind : OPKIND_SCAN;
    kernel_op(c, p, c->kind_latency_s[k], c->kind_mem_eff[k], (const char(*)[40])c->kind_names[k], bytes, flops, t, 0,
              NULL, op);
}

void cost_scan(const cost_t *c, const cost_paths_t *p, int family, bool l2, double bytes, double flops,
               double bits, llm_dtype_t t, plan_op_t *op)
{
    if (family < 0 || family >= method_scan_family_count()) {
        cost_kernel(c, p, OPKIND_SCAN, bytes, flops, t, op);
        return;
    }
    double per_bit_s = bits > 0 ? calib_x(c->cal, c->scan_bit_names[family], bits) * c->scan_bit_s[family] : 0;
    if (per_bit_s > 0) calib_note(c->cal, c->scan_bit_names[family], bits);
    if (l2) {
        kernel_op(c, p, c->scan_l2_latency_s[family] + per_bit_s, c->scan_l2_mem_eff[family],
                  (const char(*)[40])c->scan_l2_names[family], bytes, flops, t, 0, NULL, op);
        calib_note(c->cal, "l2_bytes", bytes);
        return;
    }
    kernel_op(c, p, c->scan_latency_s[family] + per_bit_s, c->scan_mem_eff[family],
              (const char(*)[40])c->scan_names[family], bytes, flops, t, c->scan_fill_bytes[family],
              c->scan_fill_names[family], op);
}

/* A decode's time for a kernel of `kind` with the layer's GEMMs queued behind it, over its time
 * alone, and that parameter's name; 0 for other kinds. */
static double after_layer_s(const cost_t *c, int kind, const char **name)
{
    switch (kind) {
    case OPKIND_SCAN: *name = "after_layer_scan_us"; return c->after_layer_scan_s;
    case OPKIND_ATTN_SPARSE: *name = "after_layer_attn_us"; return c->after_layer_attn_s;
    case OPKIND_TOPK: *name = "after_layer_topk_us"; return c->after_layer_topk_s;
    default: *name = NULL; return 0;
    }
}

void cost_after_layer(const cost_t *c, int kind, plan_op_t *op)
{
    const char *name;
    double s = after_layer_s(c, kind, &name);
    if (!(s > 0)) return;
    op->cost.latency_ps += cost_ps(s);
    calib_note(c->cal, name, NAN);
}

void cost_topk_scores_in_l2(const cost_t *c, double scores_bytes, plan_op_t *op)
{
    if (!(c->topk_scores_l2_s > 0) || !(scores_bytes <= c->l2_bytes)) return;
    sim_ps_t save = cost_ps(c->topk_scores_l2_s);
    op->cost.latency_ps = op->cost.latency_ps > save ? op->cost.latency_ps - save : 0;
    calib_note(c->cal, "topk_scores_l2_us", scores_bytes);
}

sim_ps_t cost_in_layer_ps(const cost_t *c, int kind, double scores_bytes)
{
    const char *name;
    double s = after_layer_s(c, kind, &name);
    sim_ps_t t = s > 0 ? cost_ps(s) : 0;
    if (kind == OPKIND_TOPK && c->topk_scores_l2_s > 0 && scores_bytes <= c->l2_bytes) t -= cost_ps(c->topk_scores_l2_s);
    return t;
}

void cost_attn_qh(const cost_t *c, const cost_paths_t *p, double bytes, double flops, llm_dtype_t t, plan_op_t *op)
{
    static const char names[2][40] = {"attn_sparse_qh_latency_us", "attn_sparse_qh_mem_eff"};
    kernel_op(c, p, c->attn_qh_latency_s, c->attn_qh_mem_eff, names, bytes, flops, t, 0, NULL, op);
}

void cost_attn_l2(const cost_t *c, const cost_paths_t *p, double bytes, bool qh, plan_op_t *op)
{
    op->exec = PLAN_EXEC_GPU;
    op->n_uses = 0;
    op->cost.work = bytes;
    /* its own rate: the bytes do not cross HBM */
    op->cost.cap_rate = (qh ? c->attn_qh_l2_mem_eff : c->attn_l2_mem_eff) * c->hbm_Bps;
    sm_share(c, p, op->cost.cap_rate, op);
    op->cost.latency_ps = cost_ps(qh ? c->attn_qh_l2_latency_s : c->attn_l2_latency_s);
    op->weight = 1.0;
    op->launch_ps = cost_ps(c->launch_s);
    calib_note(c->cal, qh ? "attn_sparse_qh_l2_latency_us" : "attn_sparse_l2_latency_us", NAN);
    calib_note(c->cal, qh ? "attn_sparse_qh_l2_mem_eff" : "attn_sparse_l2_mem_eff", NAN);
    calib_note(c->cal, "l2_bytes", bytes);
    calib_note(c->cal, "launch_us", NAN);
}

void cost_l2_pass(const cost_t *c, cost_l2_t *l2, double read_bytes, double written_bytes)
{
    double L = c->l2_bytes, T = fmax(read_bytes, 0) + fmax(written_bytes, 0);
    if (!(L > 0) || !(T > 0)) return;
    double kept = l2->dirty_bytes * fmax(0, 1 - T / L) + fmax(written_bytes, 0) * fmin(1, L / T);
    l2->dirty_bytes = fmin(kept, c->l2_dirty_bytes);
}

void cost_l2_writeback(const cost_t *c, const cost_paths_t *p, double bytes, plan_op_t *op)
{
    op->exec = PLAN_EXEC_GPU;
    op->n_uses = 1;
    op->uses[0] = (plan_use_t){p->hbm, c->hbm_Bps / c->l2_writeback_Bps};
    op->cost = (plan_cost_t){.work = bytes, .cap_rate = c->l2_writeback_Bps};
    op->weight = 1.0;
    op->launch_ps = 0;
    calib_note(c->cal, "l2_dirty_frac", bytes);
    calib_note(c->cal, "l2_writeback_eff", NAN);
}

double cost_attn_splits(const cost_t *c, double rows_per_head, double heads)
{
    double want = ceil(c->split_blocks_per_sm * c->sm_count / fmax(heads, 1));
    double most = ceil(rows_per_head / c->split_min_rows);
    return fmax(1, fmin(want, most));
}

void cost_attn_dense_blocks(const cost_t *c, double rows_per_head, double heads, plan_op_t *op)
{
    double blocks = heads * cost_attn_splits(c, rows_per_head, heads);
    op->cost.latency_ps += cost_ps(calib_x(c->cal, "attn_dense_block_us", blocks / c->sm_count) * c->attn_dense_block_s);
    calib_note(c->cal, "attn_dense_block_us", blocks / c->sm_count);
}

void cost_attn_combine(const cost_t *c, double splits, bool l2, plan_op_t *op)
{
    double lat = l2 ? c->combine_l2_latency_s : c->combine_latency_s, per = l2 ? c->combine_l2_split_s : c->combine_split_s;
    op->exec = PLAN_EXEC_GPU;
    op->n_uses = 0;
    op->cost.work = 0;
    op->cost.cap_rate = 0;
    op->cost.latency_ps =
        cost_ps(lat + calib_x(c->cal, l2 ? "attn_combine_l2_split_ns" : "attn_combine_split_ns", splits) * per);
    op->weight = 1.0;
    op->launch_ps = cost_ps(c->launch_s);
    op->pieces = (uint32_t)fmin(splits, 4294967295.0);
    calib_note(c->cal, l2 ? "attn_combine_l2_latency_us" : "attn_combine_latency_us", NAN);
    calib_note(c->cal, l2 ? "attn_combine_l2_split_ns" : "attn_combine_split_ns", splits);
    calib_note(c->cal, "attn_split_blocks_per_sm", NAN);
    calib_note(c->cal, "attn_split_min_rows", NAN);
    calib_note(c->cal, "launch_us", NAN);
}

double cost_topk_blocks_per_row(const cost_t *c, double rows, double n)
{
    double cap = fmax(1, floor(c->topk_blocks_per_sm * c->sm_count / fmax(rows, 1)));
    return fmax(1, fmin(ceil(n / c->topk_block_elems), cap));
}

double cost_topk_winner_warps(double n, double k)
{
    if (n <= 0 || k <= 0) return 0;
    double none = 1;   /* P(a warp holds none of k winners drawn without replacement) */
    for (int i = 0; i < 32 && none > 0; i++) none *= fmax(0, n - fmin(k, n) - i) / fmax(n - i, 1);
    return n / 32.0 * (1.0 - none);
}

void cost_topk(const cost_t *c, const cost_paths_t *p, double rows, double n, double k, plan_op_t *op)
{
    double per_block = n > 0 ? ceil(n / cost_topk_blocks_per_row(c, rows, n)) : 0;
    bool l2 = 4.0 * rows * n <= c->l2_bytes;
    double row_warps = cost_topk_winner_warps(n, k), warps = rows * row_warps;
    /* each term at its count, clamped where calib_clamp asks */
    double t_rows = calib_x(c->cal, l2 ? "topk_row_l2_us" : "topk_row_us", rows) * (l2 ? c->topk_row_l2_s : c->topk_row_s);
    double t_work = calib_x(c->cal, l2 ? "topk_elem_l2_ns" : "topk_elem_ns", per_block) * (l2 ? c->topk_elem_l2_s : c->topk_elem_s) +
                    calib_x(c->cal, "topk_winner_ns", warps) * c->topk_winner_s +
                    calib_x(c->cal, "topk_winner_row_ns", row_warps) * c->topk_winner_row_s + t_rows;
    double bytes = 4.0 * rows * n * c->topk_passes, hbm_rate = c->hbm_Bps * c->kernel_mem_eff;
    double rate = t_work > 0 ? bytes / t_work : hbm_rate;   /* the walk's own pace */
    op->exec = PLAN_EXEC_GPU;
    op->n_uses = 0;
    op->cost.work = bytes;
    op->cost.cap_rate = rate;
    op->uses[op->n_uses++] = (plan_use_t){p->hbm, 1.0 / c->kernel_mem_eff};
    sm_share(c, p, fmin(rate, hbm_rate), op);
    op->cost.latency_ps = cost_ps(l2 ? c->topk_latency_l2_s : c->topk_latency_s);
    op->weight = 1.0;
    op->launch_ps = cost_ps(c->launch_s);
    calib_note(c->cal, l2 ? "topk_latency_l2_us" : "topk_latency_us", NAN);
    calib_note(c->cal, "launch_us", NAN);
    calib_note(c->cal, "l2_bytes", 4.0 * rows * n);
    if (!l2) calib_note(c->cal, "kernel_mem_eff", NAN);
    if (per_block > 0) calib_note(c->cal, l2 ? "topk_elem_l2_ns" : "topk_elem_ns", per_block);
    if (warps > 0) calib_note(c->cal, "topk_winner_ns", warps);
    if (row_warps > 0) calib_note(c->cal, "topk_winner_row_ns", row_warps);
    if (t_rows > 0) calib_note(c->cal, l2 ? "topk_row_l2_us" : "topk_row_us", rows);
    calib_note(c->cal, "topk_passes", NAN);
    calib_note(c->cal, "topk_block_elems", NAN);
    calib_note(c->cal, "topk_blocks_per_sm", NAN);
}

void cost_gemm_init(const cost_t *c, double weight_bytes, double act_bytes_per_token, double flops_per_token,
                    double tokens, int kernels, llm_dtype_t t, cost_gemm_t *g)
{
    double peak = (t == LLM_FP8 && c->fp8_flops > 0) ? c->fp8_flops : c->bf16_flops;
    *g = (cost_gemm_t){weight_bytes, act_bytes_per_token, flops_per_token, tokens, kernels * c->gemm_latency_s,
                       c->gemm_mem_eff * c->hbm_Bps, c->gemm_compute_eff * peak};
}

int cost_gemm_fn(const void *model, uint32_t batch, plan_cost_t *out)
{
    const cost_gemm_t *g = model;
    if (!batch) batch = 1;
    double tokens = g->tokens * batch;
    double work = g->weight_bytes + tokens * g->act_bytes_per_token;
    double t_flops = tokens * g->flops_per_token / g->peak_eff_flops;
    out->work = work;
    out->cap_rate = t_flops > 0 ? work / t_flops : 0;
    out->latency_ps = cost_ps(g->latency_s);
    return ERR_OK;
}

void cost_gemm_op(const cost_t *c, const cost_paths_t *p, const cost_gemm_t *g, plan_op_t *op)
{
    op->exec = PLAN_EXEC_GPU;
    op->n_uses = 1;
    op->uses[0] = (plan_use_t){p->hbm, c->hbm_Bps / g->hbm_eff_Bps};
    cost_gemm_fn(g, 1, &op->cost);
    sm_share(c, p, op->cost.cap_rate > 0 ? fmin(op->cost.cap_rate, g->hbm_eff_Bps) : g->hbm_eff_Bps, op);
    op->cost_fn = cost_gemm_fn;
    op->cost_model = g;
    op->weight = 1.0;
    op->launch_ps = cost_ps(c->launch_s);
    calib_note(c->cal, "gemm_latency_us", NAN);
    calib_note(c->cal, "gemm_mem_eff", NAN);
    calib_note(c->cal, "gemm_compute_eff", g->tokens);
    calib_note(c->cal, "launch_us", NAN);
}

