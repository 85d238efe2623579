/* fit_link — fitters of the copy-engine forms: copies, duplex, 2D and batched copies. */
#include "validation/fit_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the copy engine ------------------------------------------------------------------------- */

/* One direction's single copies: t = lat + bytes/bw, WLS 1/t². */
static int fit_ce_dir(const sel_t *d, const char *what, lsq_fit_t *lf, err_t *e)
{
    int rc = line_of(d, get_bytes, what, lf, e);
    if (!rc && !(lf->coef[1] > 0))
        rc = err_set(e, ERR_CONVERGE, "fit %s: did not converge (the bandwidth came out non-positive)", what);
    return rc;
}

static int fit_ce_gap(fit_t *f, const sel_t *rows, const char *alloc, double lat, double us_per_byte, err_t *e);

/* Copy-engine latency and bandwidth per direction. The profile has one ce_latency_us: it is the
 * H2D fit's (the direction on decode's critical path); D2H's own latency is noted. */
int fit_ce(fit_t *f, const sel_t *rows, err_t *e)
{
    sel_t all = {0}, dir_rows[2] = {{0}, {0}};
    int rc = ERR_OK;
    for (size_t i = 0; i < rows->n && !rc; i++) {
        const kbrow_t *r = rows->v[i];
        if ((is_op(r, OPKIND_H2D_COPY) || is_op(r, OPKIND_D2H_COPY)) && alone(r) && !(r->pieces > 1) &&
            r->bytes_moved > 0)
            rc = sel_add(&all, r);
    }
    const char *alloc = all.n ? mode_of(&all, get_alloc) : "";
    for (size_t i = 0; i < all.n && !rc; i++)
        if (!strcmp(all.v[i]->allocator, alloc)) rc = sel_add(&dir_rows[is_op(all.v[i], OPKIND_D2H_COPY)], all.v[i]);
    free(all.v);
    if (rc) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    static const char *const bw_name[2] = {"h2d_GBps", "d2h_GBps"};
    static const char *const what[2] = {"H2D copies t = lat + bytes/bw", "D2H copies t = lat + bytes/bw"};
    lsq_fit_t lf[2];
    bool have[2] = {false, false};
    for (int d = 0; d < 2 && !rc; d++) {
        if (dir_rows[d].n < 3) {
            note(f, "%s: not determined (%zu single copies in the fit set)", bw_name[d], dir_rows[d].n);
            continue;
        }
        rc = fit_ce_dir(&dir_rows[d], what[d], &lf[d], e);
        have[d] = !rc;
    }
    int ld = have[0] ? 0 : 1;   /* the direction whose latency the profile keeps */
    if (!rc && !have[0] && !have[1]) note(f, "ce_latency_us: not determined (no single CE copies)");
    if (!rc && (have[0] || have[1])) {
        char how[256];
        for (int d = 0; d < 2; d++) {
            if (!have[d]) continue;
            double lo, hi, sl = lf[d].coef[1], gbps = 1e-3 / sl;
            range_of(&dir_rows[d], get_bytes, &lo, &hi);
            snprintf(how, sizeof how, "single %s %s copies, t = lat + bytes/bw, WLS 1/t^2", alloc, d ? "D2H" : "H2D");
            put(f, bw_name[d], gbps, gbps * lf[d].se[1] / sl, lo, hi, dir_rows[d].v, dir_rows[d].n, how);
            if (d == ld) put(f, "ce_latency_us", lf[d].coef[0], lf[d].se[0], lo, hi, dir_rows[d].v, dir_rows[d].n, how);
        }
        if (have[0] && have[1])
            note(f, "ce_latency_us is the H2D fit's %.3g us; D2H copies alone fit %.3g +- %.2g us (the profile has one "
                    "copy-engine latency)", lf[0].coef[0], lf[1].coef[0], lf[1].se[0]);
        /* Residuals under the profile's values: one latency for both directions. */
        for (int d = 0; d < 2; d++) {
            if (!have[d]) continue;
            size_t n = dir_rows[d].n;
            double *pred = malloc(n * sizeof *pred), *meas = malloc(n * sizeof *meas);
            if (!pred || !meas) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
            for (size_t i = 0; !rc && i < n; i++) {
                pred[i] = lf[ld].coef[0] + dir_rows[d].v[i]->bytes_moved * lf[d].coef[1];
                meas[i] = dir_rows[d].v[i]->t_med_us;
            }
            if (!rc) resid(f, d ? "ce_copy_d2h" : "ce_copy_h2d", pred, meas, n);
            free(pred);
            free(meas);
        }
    }
    free(dir_rows[0].v);
    free(dir_rows[1].v);
    if (!rc && have[0]) rc = fit_ce_gap(f, rows, alloc, lf[0].coef[0], lf[0].coef[1], e);
    return rc;
}

/* The time each further copy adds in a chain of H2D copies issued back to back on one stream: the
 * copy engine overlaps part of a copy's setup with the one before, so a chain of N costs
 * lat + (N−1)·gap + bytes/bw, not N·lat. One-parameter WLS (1/t²) of t − lat − bytes/bw on N − 1. */
static int fit_ce_gap(fit_t *f, const sel_t *rows, const char *alloc, double lat, double us_per_byte, err_t *e)
{
    sel_t s = {0};
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (is_op(r, OPKIND_H2D_COPY) && alone(r) && r->pieces >= 2 && r->bytes_moved > 0 &&
            !strcmp(r->allocator, alloc) && sel_add(&s, r))
            return free(s.v), err_set(e, ERR_NOMEM, "fit: out of memory");
    }
    if (s.n < 2) {
        note(f, "ce_b2b_gap_us: not determined (%zu chains of copies)", s.n);
        free(s.v);
        return ERR_OK;
    }
    double *X = malloc(s.n * sizeof *X), *y = malloc(s.n * sizeof *y), *w = malloc(s.n * sizeof *w);
    double *pred = malloc(s.n * sizeof *pred), *meas = malloc(s.n * sizeof *meas);
    int rc = (!X || !y || !w || !pred || !meas) ? err_set(e, ERR_NOMEM, "fit: out of memory") : ERR_OK;
    for (size_t i = 0; !rc && i < s.n; i++) {
        meas[i] = s.v[i]->t_med_us;
        X[i] = s.v[i]->pieces - 1;
        y[i] = meas[i] - lat - s.v[i]->bytes_moved * us_per_byte;
        w[i] = 1.0 / (meas[i] * meas[i]);
    }
    lsq_fit_t gf;
    if (!rc) rc = lsq_wlinear("ce chains t - lat - bytes/bw = (N-1)*gap", X, y, w, s.n, 1, &gf, e);
    if (!rc) {
        double lo, hi;   /* the predictor: the chain's length */
        range_of(&s, get_pieces, &lo, &hi);
        put(f, "ce_b2b_gap_us", fmax(gf.coef[0], 0), gf.se[0], lo, hi, s.v, s.n,
            "chains of N back-to-back H2D copies: t - ce_latency - bytes/h2d = (N-1)*gap, WLS 1/t^2");
        for (size_t i = 0; i < s.n; i++) pred[i] = lat + s.v[i]->bytes_moved * us_per_byte + X[i] * fmax(gf.coef[0], 0);
        resid(f, "ce_copy_chain", pred, meas, s.n);
    }
    free(X), free(y), free(w), free(pred), free(meas), free(s.v);
    return rc;
}

/* ---- concurrent groups (mix rows) ------------------------------------------------------------ */

/* Groups consecutive mix rows of one file: a group starts at concurrent_id 0. */
int mix_groups(const sel_t *rows, const char *policy, mixgrp_t **out, size_t *n_out)
{
    mixgrp_t *g = NULL;
    size_t n = 0;
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (strcmp(r->policy, policy) || isnan(r->concurrent_id)) continue;
        bool start = r->concurrent_id == 0 || !n || g[n - 1].n == 16 ||
                     g[n - 1].row[0]->file_index != r->file_index;
        if (start) {
            mixgrp_t *ng = realloc(g, (n + 1) * sizeof *ng);
            if (!ng) {
                free(g);
                return ERR_NOMEM;
            }
            g = ng;
            g[n++].n = 0;
        }
        g[n - 1].row[g[n - 1].n++] = r;
    }
    *out = g;
    *n_out = n;
    return ERR_OK;
}

int fit_duplex(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    mixgrp_t *g;
    size_t ng;
    if (mix_groups(rows, "mix:h2d+d2h", &g, &ng)) return err_set(e, ERR_NOMEM, "fit: out of memory");
    double lat;
    int rc = value_of(f, seed, "ce_latency_us", &lat, e);
    double X[256], y[256], w[256], pred[256], meas[256];
    const kbrow_t *used[512];
    size_t n = 0, nu = 0;
    for (size_t i = 0; !rc && i < ng && n < 256; i++) {
        if (g[i].n != 2) continue;
        double tmax = fmax(g[i].row[0]->t_med_us, g[i].row[1]->t_med_us);
        double b = g[i].row[0]->bytes_moved + g[i].row[1]->bytes_moved;
        if (!(b > 0) || tmax <= lat) continue;
        X[n] = b;
        y[n] = tmax - lat;
        w[n] = 1.0 / (tmax * tmax);
        meas[n] = tmax;
        n++;
        used[nu++] = g[i].row[0];
        used[nu++] = g[i].row[1];
    }
    free(g);
    if (rc) return rc;
    if (!n) {
        note(f, "duplex_GBps: not determined (no mix:h2d+d2h pairs)");
        return ERR_OK;
    }
    lsq_fit_t lf;
    rc = lsq_wlinear("duplex t = lat + (bytes_h2d + bytes_d2h)/duplex", X, y, w, n, 1, &lf, e);
    if (rc) return rc;
    if (!(lf.coef[0] > 0)) return err_set(e, ERR_CONVERGE, "fit duplex: did not converge (non-positive rate)");
    double gbps = 1e-3 / lf.coef[0];
    double lo = INFINITY, hi = 0;
    for (size_t i = 0; i < n; i++) {
        lo = fmin(lo, X[i] / 2);
        hi = fmax(hi, X[i] / 2);
        pred[i] = lat + X[i] * lf.coef[0];
    }
    put(f, "duplex_GBps", gbps, gbps * lf.se[0] / lf.coef[0], lo, hi, used, nu,
        "H2D and D2H copies at once: last completion = ce_latency + total bytes/duplex, WLS 1/t^2");
    resid(f, "duplex", pred, meas, n);
    return ERR_OK;
}

/* ---- 2D and batched copies ------------------------------------------------------------------- */


int fit_per_piece(fit_t *f, const sel_t *rows, const calib_t *seed, int kind, const char *name,
                         double scale, const char *how, const char *group, err_t *e)
{
    sel_t s = {0};
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (is_op(r, kind) && alone(r) && r->pieces > 0 && r->bytes_moved > 0 && sel_add(&s, r)) {
            free(s.v);
            return err_set(e, ERR_NOMEM, "fit: out of memory");
        }
    }
    if (!s.n) {
        note(f, "%s: not determined (no %s rows in the fit set)", name, opkind_name(kind));
        return ERR_OK;
    }
    double lat, h2d;
    int rc = value_of(f, seed, "ce_latency_us", &lat, e);
    if (!rc) rc = value_of(f, seed, "h2d_GBps", &h2d, e);
    double *X = malloc(s.n * sizeof *X), *y = malloc(s.n * sizeof *y);
    double *pred = malloc(s.n * sizeof *pred), *meas = malloc(s.n * sizeof *meas);
    if (!rc && (!X || !y || !pred || !meas)) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    lsq_fit_t lf;
    if (!rc) {
        for (size_t i = 0; i < s.n; i++) {
            const kbrow_t *r = s.v[i];
            double base = lat + r->bytes_moved / (h2d * 1e3);
            /* Relative form (both sides over t), fitted robustly: a few pieces sizes on this
             * platform take several times the others (bisquare weights them down). */
            X[i] = r->pieces / r->t_med_us;
            y[i] = (r->t_med_us - base) / r->t_med_us;
            meas[i] = r->t_med_us;
        }
        rc = lsq_robust(name, X, y, s.n, 1, &lf, e);
    }
    if (!rc) {
        double v = lf.coef[0] * scale, se = lf.se[0] * scale;
        if (v < 0) {
            note(f, "%s: the fit gave %.4g (< 0: no per-piece cost visible); written as 0", name, v);
            v = 0;
        }
        double lo, hi;
        range_of(&s, get_piece, &lo, &hi);
        put(f, name, v, se, lo, hi, s.v, s.n, how);
        for (size_t i = 0; i < s.n; i++)
            pred[i] = lat + s.v[i]->bytes_moved / (h2d * 1e3) + s.v[i]->pieces * v / scale;
        resid(f, group, pred, meas, s.n);
    }
    free(X);
    free(y);
    free(pred);
    free(meas);
    free(s.v);
    return rc;
}

