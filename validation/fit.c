#include "validation/fit.h"
#include "validation/fit_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fit_free(fit_t *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n_p; i++) {
        free((char *)f->p[i].name);
        free((char *)f->p[i].origin);
    }
    for (size_t i = 0; i < f->n_r; i++) free((char *)f->r[i].name);
    for (size_t i = 0; i < f->n_notes; i++) free(f->notes[i]);
    free(f->p);
    free(f->r);
    free(f->notes);
    free(f->pts);
    free(f);
}

size_t fit_n_params(const fit_t *f) { return f->n_p; }
const fit_param_t *fit_param_at(const fit_t *f, size_t i) { return i < f->n_p ? &f->p[i] : NULL; }
size_t fit_n_resid(const fit_t *f) { return f->n_r; }
const fit_resid_t *fit_resid_at(const fit_t *f, size_t i) { return i < f->n_r ? &f->r[i] : NULL; }
size_t fit_n_notes(const fit_t *f) { return f->n_notes; }
size_t fit_n_points(const fit_t *f) { return f->n_pts; }
const fit_point_t *fit_point_at(const fit_t *f, size_t i) { return i < f->n_pts ? &f->pts[i] : NULL; }
const char *fit_note_at(const fit_t *f, size_t i) { return i < f->n_notes ? f->notes[i] : NULL; }

void fit_row_counts(const fit_t *f, size_t *n_fit, size_t *n_held, size_t *n_unused)
{
    *n_fit = f->n_fit;
    *n_held = f->n_held;
    *n_unused = f->n_unused;
}

/* ---- driver ---------------------------------------------------------------------------------- */

/* kbench's kernels timed as in a layer rather than alone after an L2 flush ("<layout>;after_...":
 * with the layer's GEMMs queued behind them, or with nothing behind as their twin; kernels suite
 * sec_after_layer): what a decode's kernels pay for the GEMMs queued behind them
 * (run h200-2157-behind (git history, before e518637)). Only fit_after_layer reads them; every kernel's own line
 * stays on the rows timed after a flush. */
static bool after_other_work(const kbrow_t *r) { return strstr(r->layout, ";after_") != NULL; }

/* Equal, or both absent (NaN). */
static bool same_num(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* Whether a and b time the same kernel at the same size, a with layout suffix sa (";after_layer",
 * ";after_scores") and b with sb (";after_flush"), their layouts equal but for it. */
static bool twins(const kbrow_t *a, const char *sa, const kbrow_t *b, const char *sb)
{
    const char *pa = strstr(a->layout, sa), *pb = strstr(b->layout, sb);
    return pa && pb && !strcmp(pa, sa) && !strcmp(pb, sb) && pa - a->layout == pb - b->layout &&
           !strncmp(a->layout, b->layout, (size_t)(pa - a->layout)) && a->op == b->op &&
           !strcmp(a->variant, b->variant) && same_num(a->n_tokens, b->n_tokens) && same_num(a->heads, b->heads) &&
           same_num(a->k, b->k) && same_num(a->qheads, b->qheads);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One term from twin rows of kind `op`: `sign`·(t(suffix sa) − t(";after_flush")), its median over
 * the twins (at least 0), standard error 1.2533·sd/√n; 0 where the fit set has no twins (kbench
 * before ce6b1ed), said to be derived. At most 256 twins are read (the kernels suite has 3 to 6). */
static void fit_twin_term(fit_t *f, const sel_t *after, int op, const char *sa, double sign, const char *name,
                          const char *how)
{
    size_t n = 0;
    double d[256], pred[256], meas[256], lo = INFINITY, hi = 0;
    const kbrow_t *used[256];
    for (size_t i = 0; i < after->n && n < 256; i++)
        for (size_t j = 0; j < after->n && n < 256; j++) {
            const kbrow_t *a = after->v[i], *b = after->v[j];
            if (a->op != op || !twins(a, sa, b, ";after_flush")) continue;
            d[n] = sign * (a->t_med_us - b->t_med_us);
            pred[n] = b->t_med_us;
            meas[n] = a->t_med_us;
            used[n++] = a;
            lo = fmin(lo, b->t_med_us), hi = fmax(hi, b->t_med_us);
        }
    if (!n) {
        char why[120];
        snprintf(why, sizeof why, "derived: none (no %s rows with an ;after_flush twin in the fit set)", sa);
        put(f, name, 0, 0, NAN, NAN, NULL, 0, why);
        return;
    }
    double sorted[256], mean = 0, ss = 0;
    memcpy(sorted, d, n * sizeof *d);
    qsort(sorted, n, sizeof *sorted, cmp_dbl);
    double med = fmax(n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]), 0);
    for (size_t i = 0; i < n; i++) mean += d[i] / n;
    for (size_t i = 0; i < n; i++) ss += (d[i] - mean) * (d[i] - mean);
    double se = n > 1 ? 1.2533 * sqrt(ss / (n - 1)) / sqrt((double)n) : 0;
    put(f, name, med, se, lo, hi, used, n, how);
    for (size_t i = 0; i < n; i++) pred[i] += sign * med;
    resid(f, name, pred, meas, n);
    note(f, "%s: %.3g +- %.2g us over %zu twins (%.3g..%.3g)", name, med, se, n, sorted[0], sorted[n - 1]);
}

/* What a decode's scan, attention over its winners and top-k add for the layer's GEMMs queued behind
 * them (their time with the GEMMs behind less their time with nothing behind), and what a top-k saves
 * over scores its scan has just written to the L2 (its time after a flush less its time over scores
 * rewritten after the flush). */
static void fit_after_layer(fit_t *f, const sel_t *after)
{
    static const char *const layer_how =
        "median over twin rows of t(;after_layer: the layer's GEMMs queued behind it, kbench 5df4a1b on) - t(;after_flush)";
    fit_twin_term(f, after, OPKIND_SCAN, ";after_layer", 1, "after_layer_scan_us", layer_how);
    fit_twin_term(f, after, OPKIND_ATTN_SPARSE, ";after_layer", 1, "after_layer_attn_us", layer_how);
    fit_twin_term(f, after, OPKIND_TOPK, ";after_layer", 1, "after_layer_topk_us", layer_how);
    fit_twin_term(f, after, OPKIND_TOPK, ";after_scores", -1, "topk_scores_l2_us",
                  "median over twin rows of t(right after an L2 flush) - t(over its scores rewritten after the flush)");
}

int fit_run(const kbset_t *set, const heldout_t *ho, const calib_t *seed, fit_t **out, err_t *e)
{
    *out = NULL;
    fit_t *f = calloc(1, sizeof *f);
    if (!f) return err_set(e, ERR_NOMEM, "fit: out of memory");
    for (size_t i = 0; i < kbset_n_files(set); i++) {   /* the highest ceiling any suite measured */
        const char *v = kbset_meta(set, i, "ceiling_hbm_gbps");
        if (v && atof(v) > f->hbm_ceiling_GBps) f->hbm_ceiling_GBps = atof(v);
    }
    sel_t rows = {0}, after = {0};
    int rc = ERR_OK;
    for (size_t i = 0; i < kbset_n_rows(set) && !rc; i++) {
        const kbrow_t *r = kbset_row(set, i);
        heldout_class_t c = heldout_classify(ho, r, NULL, 0);
        if (c == HELDOUT_FIT && after_other_work(r)) {
            f->n_fit++;
            if (sel_add(&after, r)) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
        } else if (c == HELDOUT_FIT) {
            f->n_fit++;
            if (sel_add(&rows, r)) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
        } else if (c == HELDOUT_HELD || c == HELDOUT_SEALED) {
            f->n_held++;
        } else {
            f->n_unused++;
        }
    }
    if (!rc && !rows.n) rc = err_set(e, ERR_INVAL, "fit: no rows in the fit set (%zu rows read, %zu held out)",
                                     kbset_n_rows(set), f->n_held);
    if (!rc) rc = fit_ce(f, &rows, e);
    if (!rc) rc = fit_duplex(f, &rows, seed, e);
    if (!rc) rc = fit_per_piece(f, &rows, seed, OPKIND_H2D_BATCH, "cebatch_piece_us", 1.0,
                                "cudaMemcpyBatchAsync: t - ce_latency - bytes/h2d = pieces*piece, robust (bisquare) in relative terms "
                                "(per-piece latency and piece-size efficiency fitted as one parameter)", "ce_batch", e);
    if (!rc) rc = fit_gather_latency(f, &rows, e);
    if (!rc) rc = fit_gather(f, &rows, seed, e);
    if (!rc) rc = fit_gather_tlb(f, &rows, seed, e);
    if (!rc) rc = fit_gather_knots(f, &rows, seed, e);
    if (!rc) rc = fit_plane_knots(f, &rows, seed, e);
    if (!rc) rc = fit_prefix(f, &rows, seed, e);
    if (!rc) rc = fit_zc_scan(f, &rows, seed, e);
    if (!rc) rc = fit_per_piece(f, &rows, seed, OPKIND_H2D_COPY2D, "ce2d_row_ns", 1e3,
                                "cudaMemcpy2DAsync: t - ce_latency - bytes/h2d = rows*row, robust (bisquare) in relative terms "
                                "(latency and bandwidth from the CE fit: every 2D row moves the same bytes)",
                                "ce_copy2d", e);
    if (!rc) rc = fit_strided(f, &rows, seed, e);
    if (!rc) rc = fit_sharing(f, &rows, seed, e);
    if (!rc) rc = fit_kernels(f, &rows, seed, e);
    if (!rc) fit_after_layer(f, &after);
    if (!rc) rc = fit_gemm(f, &rows, seed, e);
    if (!rc) rc = fit_l2_writeback(f, &rows, seed, e);
    if (!rc) rc = fit_overhead(f, &rows, OPKIND_LAUNCH, "host_enqueue", "launch_us", e);
    if (!rc && has_variant(&rows, OPKIND_LAUNCH, "copy_enqueue"))
        rc = fit_overhead(f, &rows, OPKIND_LAUNCH, "copy_enqueue", "copy_launch_us", e);
    else if (!rc)
        note(f, "copy_launch_us: not determined (no launch/copy_enqueue rows)");
    if (!rc) fit_handoff(f, &rows);
    if (!rc) fit_event(f, &rows);
    if (!rc) rc = fit_graph(f, &rows, e);
    if (!rc) rc = fit_timeslice(f, &rows, e);
    if (!rc) rc = fit_jitter(f, &rows, e);
    /* kbench's planner rows carry no bytes: their time is the planner's fixed time. */
    if (!rc && hwcat_param_unit("wf_plan_latency_us")) {
        rc = fit_overhead(f, &rows, OPKIND_WF_PLAN, NULL, "wf_plan_latency_us", e);
        if (!rc && hwcat_param_unit("wf_plan_mem_eff"))
            note(f, "wf_plan_mem_eff: not determined (kbench's wf_plan rows carry no bytes: their whole time is the latency)");
    }
    if (!rc) rc = fit_overhead(f, &rows, OPKIND_SAMPLE, NULL, "sample_us", e);
    if (!rc && f->rc_nomem) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    if (!rc && !f->n_p) rc = err_set(e, ERR_INVAL, "fit: the %zu fit rows determine no parameter", rows.n);
    if (!rc && f->n_unused) note(f, "%zu rows are neither fitted nor held out (no rule of the held-out file takes them)", f->n_unused);
    free(rows.v);
    free(after.v);
    if (rc) {
        fit_free(f);
        return rc;
    }
    *out = f;
    return ERR_OK;
}
