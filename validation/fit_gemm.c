/* fit_gemm — fitters of the GEMM forms: GEMMs by batch and the L2 write-back after them. */
#include "validation/fit_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- GEMMs by batch -------------------------------------------------------------------------- */

/* A GEMM row's FLOPs: the flops column, else kbench's per_s (FLOP/s for gemm rows) × time. */
static double gemm_flops(const kbrow_t *r)
{
    if (r->flops > 0) return r->flops;
    if (r->per_s > 0) return r->per_s * r->t_med_us * 1e-6;
    return NAN;
}

static const double MIB = 1048576.0;

/* kbench's layer GEMMs timed after a memset left region_bytes dirty in the L2 (fit_l2_writeback). */
static bool after_write(const kbrow_t *r) { return is_op(r, OPKIND_GEMM) && !strcmp(r->variant, "layer_after_write"); }

/* χ² of t = a + s·min(W, C), WLS 1/t², at dirty cap C (MiB, times in us); the line's fit in *lf. */
static int l2_line(const sel_t *s, double C, double *X, double *y, double *w, lsq_fit_t *lf, err_t *e)
{
    for (size_t i = 0; i < s->n; i++) {
        X[2 * i] = 1;
        X[2 * i + 1] = fmin(s->v[i]->region_bytes / MIB, C);
        y[i] = s->v[i]->t_med_us;
        w[i] = 1 / (y[i] * y[i]);
    }
    return lsq_wlinear("gemm after a write: t = a + s*min(W, C)", X, y, w, s->n, 2, lf, e);
}

/* t_us = a + s·min(W, C) at row i (W and C in MiB) and its gradient in (a, s, C). */
static double l2_model(const void *ctx, size_t i, const double *th, double *g)
{
    double W = ((const sel_t *)ctx)->v[i]->region_bytes / MIB;
    g[0] = 1;
    g[1] = fmin(W, th[2]);
    g[2] = W > th[2] ? th[1] : 0;
    return th[0] + th[1] * g[1];
}

/* The L2's dirty lines written back under the GEMMs after them (kbench's gemm layer_after_write rows:
 * a layer's GEMMs right after a memset of W bytes): t = a + min(W, C)/wb, WLS 1/t², nonlinear in the
 * cap C: the line at each C of a log grid over the rows' sizes gives the start (least χ²), then
 * gsl_multifit_nlinear fits a, 1/wb and C together, their standard errors from its covariance. The
 * profile keeps C as a share of l2_bytes and wb as one of hbm_GBps (l2_dirty_frac,
 * l2_writeback_eff), so presets of other GPUs scale them. */
int fit_l2_writeback(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    sel_t s = {0};
    double wlo = INFINITY, whi = 0, wpos = INFINITY;
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (!after_write(r) || !alone(r) || !(r->region_bytes >= 0)) continue;
        if (sel_add(&s, r)) return free(s.v), err_set(e, ERR_NOMEM, "fit: out of memory");
        wlo = fmin(wlo, r->region_bytes);
        whi = fmax(whi, r->region_bytes);
        if (r->region_bytes > 0) wpos = fmin(wpos, r->region_bytes);
    }
    if (s.n < 4 || !(whi > wpos)) {
        note(f, "l2_dirty_frac, l2_writeback_eff: not determined (fewer than 4 gemm layer_after_write rows over 2 sizes)");
        return free(s.v), ERR_OK;
    }
    double l2, hbm;
    int rc = calib_get(seed, "l2_bytes", &l2, e);
    if (!rc) rc = calib_get(seed, "hbm_GBps", &hbm, e);
    enum { GRID = 512 };
    double *X = malloc(2 * s.n * sizeof *X), *y = malloc(s.n * sizeof *y), *w = malloc(s.n * sizeof *w);
    if (!rc && (!X || !y || !w)) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    size_t best = 0;
    double cap = 0;
    lsq_fit_t lf, line = {.chi2 = INFINITY};
    for (size_t g = 0; !rc && g <= GRID; g++) {
        double C = wpos / MIB * pow(whi / wpos, (double)g / GRID);   /* log-spaced: sizes a doubling apart */
        rc = l2_line(&s, C, X, y, w, &lf, e);
        if (!rc && lf.chi2 < line.chi2) best = g, line = lf, cap = C;
    }
    if (!rc && (best == GRID || best == 0)) {
        note(f, "l2_dirty_frac, l2_writeback_eff: not determined (the rows' times %s with W over all %zu rows: no cap inside them)",
             best == GRID ? "keep rising" : "stay flat", s.n);
    } else if (!rc) {
        double th[3] = {line.coef[0], line.coef[1], cap};   /* y and w are the same at every cap */
        rc = lsq_nlinear("gemm after a write: t = a + s*min(W, C)", l2_model, &s, y, w, s.n, 3, th, &lf, e);
        double slope = rc ? 0 : lf.coef[1], C = rc ? 0 : lf.coef[2];   /* us per MiB; MiB */
        if (!rc && !(slope > 0 && C > wpos / MIB && C < whi / MIB)) {
            note(f, "l2_dirty_frac, l2_writeback_eff: not determined (the fit left the rows' sizes or the time falls with W)");
        } else if (!rc) {
            double eff = MIB / (slope * 1e-6) / (hbm * 1e9);
            put(f, "l2_dirty_frac", C * MIB / l2, lf.se[2] * MIB / l2, wlo, whi, s.v, s.n,
                "gemm layer after a memset of W bytes: t = a + min(W, C)/wb, WLS 1/t2, gsl_multifit_nlinear from the least-chi2 "
                "cap of a grid; C over l2_bytes");
            put(f, "l2_writeback_eff", eff, eff * lf.se[1] / slope, wlo, whi, s.v, s.n,
                "gemm layer after a memset of W bytes: t = a + min(W, C)/wb, WLS 1/t2, gsl_multifit_nlinear; wb over hbm_GBps");
            double *pred = malloc(s.n * sizeof *pred);
            if (!pred) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
            double g[3];
            for (size_t i = 0; !rc && i < s.n; i++) pred[i] = l2_model(&s, i, lf.coef, g);
            if (!rc) resid(f, "gemm_after_write", pred, y, s.n);
            free(pred);
        }
    }
    free(X);
    free(y);
    free(w);
    free(s.v);
    return rc;
}

int fit_gemm(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    double hbm, peak, lat;
    int rc = calib_get(seed, "hbm_GBps", &hbm, e);
    if (!rc) rc = calib_get(seed, "bf16_TFLOPS", &peak, e);
    if (!rc) rc = value_of(f, seed, "kernel_latency_us", &lat, e);
    if (rc) return rc;
    sel_t s = {0};
    for (size_t i = 0; i < rows->n && !rc; i++) {
        const kbrow_t *r = rows->v[i];
        if ((is_op(r, OPKIND_GEMM) || is_op(r, OPKIND_LM_HEAD)) && alone(r) && r->bytes_moved > 0 &&
            r->t_med_us > lat && !after_write(r))
            rc = sel_add(&s, r);
    }
    if (rc) return err_set(e, ERR_NOMEM, "fit: out of memory");
    if (!s.n) {
        note(f, "gemm_mem_eff, gemm_compute_eff: not determined (no gemm or lm_head rows)");
        return ERR_OK;
    }
    /* log(1/(t−lat)) = min(log em + log(hbm/bytes), log ec + log(peak/flops)). Where the
     * catalogs declare gemm_latency_us, the latency is fitted too: alternately, the memory-bound
     * rows' t = lat + bytes/(em·hbm) (WLS 1/t²) and the piecewise fit given lat. */
    double *y = malloc(s.n * sizeof *y), *c = malloc(2 * s.n * sizeof *c);
    int *assign = malloc(s.n * sizeof *assign);
    double *pred = malloc(s.n * sizeof *pred), *meas = malloc(s.n * sizeof *meas), *X = malloc(2 * s.n * sizeof *X);
    if (!y || !c || !assign || !pred || !meas || !X) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    double theta[2], se[2], t_min = INFINITY;
    size_t tn[2];
    for (size_t i = 0; i < s.n; i++) t_min = fmin(t_min, s.v[i]->t_med_us);
    bool fit_lat = hwcat_param_unit("gemm_latency_us") != NULL, lat_fitted = false;
    lsq_fit_t lf;
    for (int it = 0; !rc && it < FIT_MAX_ITER; it++) {
        theta[0] = theta[1] = -INFINITY;
        for (size_t i = 0; i < s.n; i++) {
            const kbrow_t *r = s.v[i];
            y[i] = -log((r->t_med_us - lat) * 1e-6);
            c[2 * i] = log(hbm * 1e9 / r->bytes_moved);
            double fl = gemm_flops(r);
            c[2 * i + 1] = fl > 0 ? log(peak * 1e12 / fl) : NAN;
            for (int j = 0; j < 2; j++)
                if (!isnan(c[2 * i + j]) && y[i] - c[2 * i + j] > theta[j]) theta[j] = y[i] - c[2 * i + j];
        }
        rc = minfit("gemm t = lat + max(bytes/(em*hbm), flops/(ec*peak))", y, c, s.n, 2, theta, se, tn, assign, e);
        if (rc || !fit_lat) break;
        size_t k = 0;
        double blo = INFINITY, bhi = 0;
        for (size_t i = 0; i < s.n; i++) {
            if (assign[i] != 0) continue;
            X[2 * k] = 1;
            X[2 * k + 1] = s.v[i]->bytes_moved;
            meas[k] = s.v[i]->t_med_us;
            pred[k] = 1.0 / (meas[k] * meas[k]);
            blo = fmin(blo, s.v[i]->bytes_moved);
            bhi = fmax(bhi, s.v[i]->bytes_moved);
            k++;
        }
        err_t e2;
        if (k < 3 || !(bhi > blo) || lsq_wlinear("gemm memory-bound rows", X, meas, pred, k, 2, &lf, &e2)) break;
        double nl = fmin(fmax(lf.coef[0], 0), 0.9 * t_min);
        lat_fitted = true;
        if (fabs(nl - lat) <= 1e-9 * fmax(1, lat)) break;
        lat = nl;
    }
    if (!rc && lat_fitted) {
        double lo, hi;
        range_of(&s, get_batch, &lo, &hi);
        put(f, "gemm_latency_us", lat, lf.se[0], lo, hi, s.v, s.n,
            "gemm/lm_head: intercept of the memory-bound rows' t = lat + bytes/(em*hbm), alternating with the piecewise fit");
    } else if (!rc && fit_lat) {
        note(f, "gemm_latency_us: not determined (fewer than 3 memory-bound GEMM rows of different sizes); kernel_latency_us used");
    }
    if (!rc) {
        static const char *const names[2] = {"gemm_mem_eff", "gemm_compute_eff"};
        for (int j = 0; j < 2 && !rc; j++) {
            if (!tn[j]) {
                note(f, "%s: not determined (no row bound by it%s)", names[j], j ? " or no FLOP counts" : "");
                continue;
            }
            sel_t t = {0};
            for (size_t i = 0; i < s.n && !rc; i++)
                if (assign[i] == j) rc = sel_add(&t, s.v[i]);
            if (rc) {
                free(t.v);
                rc = err_set(e, ERR_NOMEM, "fit: out of memory");
                break;
            }
            double lo, hi, v = exp(theta[j]);
            range_of(&s, get_batch, &lo, &hi);  /* checked over every batch, binding or not */
            put(f, names[j], v, v * se[j], lo, hi, t.v, t.n,
                "gemm/lm_head by batch: t = lat + max(bytes/(em*hbm), flops/(ec*peak)), log-space LS by binding term");
            free(t.v);
        }
        for (size_t i = 0; i < s.n; i++) {
            double inv = INFINITY;
            for (int j = 0; j < 2; j++)
                if (!isnan(c[2 * i + j])) inv = fmin(inv, theta[j] + c[2 * i + j]);
            pred[i] = lat + exp(-inv) * 1e6;
            meas[i] = s.v[i]->t_med_us;
        }
        resid(f, "gemm", pred, meas, s.n);
    }
    free(y);
    free(c);
    free(assign);
    free(pred);
    free(meas);
    free(X);
    free(s.v);
    return rc;
}

