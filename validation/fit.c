#include "validation/fit.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cost.h"
#include "models/hwcat.h"
#include "models/opkind.h"
#include "validation/lsq.h"

#define FIT_MAX_ITER 200
#define GIB (1024.0 * 1024.0 * 1024.0)

static const double knot_bytes[4] = {0.25 * GIB, 1 * GIB, 4 * GIB, 16 * GIB};
static const char *const knot_names[4] = {"gather_rows_Mps_256MiB", "gather_rows_Mps_1GiB",
                                          "gather_rows_Mps_4GiB", "gather_rows_Mps_16GiB"};

typedef struct sel {
    const kbrow_t **v;
    size_t n, cap;
} sel_t;

struct fit {
    fit_param_t *p;
    size_t n_p;
    fit_resid_t *r;
    size_t n_r;
    char **notes;
    size_t n_notes;
    fit_point_t *pts;
    size_t n_pts;
    size_t n_fit, n_held, n_unused;
    int rc_nomem;          /* sticky ERR_NOMEM from the bookkeeping helpers */
    double hbm_ceiling_GBps;  /* kbench's measured HBM copy ceiling (0: none in the headers) */
};

/* ---- bookkeeping ----------------------------------------------------------------------------- */

static char *vfmt(const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

static __attribute__((format(printf, 2, 3))) void note(fit_t *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = vfmt(fmt, ap);
    va_end(ap);
    char **nv = s ? realloc(f->notes, (f->n_notes + 1) * sizeof *nv) : NULL;
    if (!nv) {
        free(s);
        f->rc_nomem = ERR_NOMEM;
        return;
    }
    f->notes = nv;
    f->notes[f->n_notes++] = s;
}

static int sel_add(sel_t *s, const kbrow_t *r)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        const kbrow_t **nv = realloc(s->v, cap * sizeof *nv);
        if (!nv) return ERR_NOMEM;
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = r;
    return ERR_OK;
}

/* "fitted: a.csv + b.csv rows N (how)". */
static char *origin_of(const kbrow_t *const *rows, size_t n, const char *how)
{
    if (!n) {   /* derived from other parameters: how says from which */
        char *d = malloc(strlen(how) + 1);
        if (d) strcpy(d, how);
        return d;
    }
    char files[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = rows[j]->file_index == rows[i]->file_index;
        if (seen) continue;
        int k = snprintf(files + used, sizeof files - used, "%s%s", used ? " + " : "", rows[i]->file);
        if (k < 0 || (size_t)k >= sizeof files - used) break;
        used += (size_t)k;
    }
    size_t len = strlen(files) + strlen(how) + 64;
    char *s = malloc(len);
    if (s) snprintf(s, len, "fitted: %s rows %zu (%s)", files, n, how);
    return s;
}

/* Adds a fitted parameter; rows/n give its origin (none: how is the origin, "derived: ..."). */
static void put(fit_t *f, const char *name, double value, double se, double lo, double hi,
                const kbrow_t *const *rows, size_t n, const char *how)
{
    fit_param_t *nv = realloc(f->p, (f->n_p + 1) * sizeof *nv);
    char *origin = origin_of(rows, n, how);
    size_t nlen = strlen(name) + 1;
    char *nm = malloc(nlen);
    if (!nv || !origin || !nm) {
        if (nv) f->p = nv;
        free(origin);
        free(nm);
        f->rc_nomem = ERR_NOMEM;
        return;
    }
    memcpy(nm, name, nlen);
    f->p = nv;
    const char *unit = hwcat_param_unit(name);
    f->p[f->n_p++] = (fit_param_t){nm, value, se, lo, hi, unit ? unit : "", origin};
}

/* Adds a residual group from predicted and measured times. */
static void resid(fit_t *f, const char *name, const double *pred, const double *meas, size_t n)
{
    if (!n) return;
    double ss = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double r = (pred[i] - meas[i]) / meas[i];
        ss += r * r;
        if (fabs(r) > mx) mx = fabs(r);
    }
    fit_resid_t *nv = realloc(f->r, (f->n_r + 1) * sizeof *nv);
    char *nm = NULL;
    if (nv) {
        f->r = nv;
        size_t len = strlen(name) + 1;
        nm = malloc(len);
        if (nm) memcpy(nm, name, len);
    }
    if (!nv || !nm) {
        f->rc_nomem = ERR_NOMEM;
        return;
    }
    f->r[f->n_r++] = (fit_resid_t){nm, n, sqrt(ss / (double)n), mx};
    fit_point_t *np = realloc(f->pts, (f->n_pts + n) * sizeof *np);
    if (!np) {
        f->rc_nomem = ERR_NOMEM;
        return;
    }
    f->pts = np;
    for (size_t i = 0; i < n; i++) f->pts[f->n_pts++] = (fit_point_t){f->n_r - 1, meas[i], pred[i]};
}

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

const fit_param_t *fit_find(const fit_t *f, const char *name)
{
    for (size_t i = 0; i < f->n_p; i++)
        if (!strcmp(f->p[i].name, name)) return &f->p[i];
    return NULL;
}

/* The fitted value of name, else the seed's. */
static int value_of(const fit_t *f, const calib_t *seed, const char *name, double *out, err_t *e)
{
    const fit_param_t *p = fit_find(f, name);
    if (p) {
        *out = p->value;
        return ERR_OK;
    }
    return calib_get(seed, name, out, e);
}

static bool is_op(const kbrow_t *r, int kind) { return r->op == kind; }
static bool alone(const kbrow_t *r) { return isnan(r->concurrent_id) && strncmp(r->policy, "mix:", 4); }

/* The most common value of a text field among rows (NULL when none). */
static const char *mode_of(const sel_t *s, const char *(*get)(const kbrow_t *))
{
    const char *best = NULL;
    size_t best_n = 0;
    for (size_t i = 0; i < s->n; i++) {
        const char *v = get(s->v[i]);
        size_t c = 0;
        for (size_t j = 0; j < s->n; j++) c += !strcmp(get(s->v[j]), v);
        if (c > best_n) {
            best_n = c;
            best = v;
        }
    }
    return best;
}

static const char *get_alloc(const kbrow_t *r) { return r->allocator; }
static const char *get_variant(const kbrow_t *r) { return r->variant; }

static void range_of(const sel_t *s, double (*get)(const kbrow_t *), double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t i = 0; i < s->n; i++) {
        double v = get(s->v[i]);
        if (isnan(v)) continue;
        if (v < *lo) *lo = v;
        if (v > *hi) *hi = v;
    }
    if (*lo > *hi) {
        *lo = 1;
        *hi = 0;
    }
}

static double get_piece(const kbrow_t *r) { return r->piece_bytes; }
static double get_bytes(const kbrow_t *r) { return r->bytes_moved; }
static double get_blocks(const kbrow_t *r) { return r->blocks; }
static double get_batch(const kbrow_t *r) { return r->batch; }
static double get_pieces(const kbrow_t *r) { return r->pieces; }

/* The line t_med ≈ coef[0] + coef[1]·max(x(row), floor) over rows s, in relative terms
 * (lsq_line_rel). */
static int line_floor(const sel_t *s, double (*x)(const kbrow_t *), double floor, const char *what, lsq_fit_t *lf,
                      err_t *e)
{
    double *xv = malloc((s->n + 1) * sizeof *xv), *t = malloc((s->n + 1) * sizeof *t);
    int rc = (!xv || !t) ? err_set(e, ERR_NOMEM, "fit: out of memory") : ERR_OK;
    for (size_t i = 0; !rc && i < s->n; i++) {
        xv[i] = fmax(x(s->v[i]), floor);
        t[i] = s->v[i]->t_med_us;
    }
    if (!rc) rc = lsq_line_rel(what, xv, t, s->n, lf, e);
    free(xv);
    free(t);
    return rc;
}

/* The line t_med ≈ coef[0] + coef[1]·x(row) over rows s, in relative terms (lsq_line_rel). */
static int line_of(const sel_t *s, double (*x)(const kbrow_t *), const char *what, lsq_fit_t *lf, err_t *e)
{
    return line_floor(s, x, -INFINITY, what, lf, e);
}

/* ---- piecewise fits: log y_i = min_j (θ_j + c_ij) ------------------------------------------ */

/* Fits θ (m ≤ 8 terms) to n rows: alternately assigns each row to its binding term (the argmin)
 * and sets each θ_j to the mean of y_i − c_ij over its rows. c_ij = −INFINITY... is written as NAN
 * for a term that does not apply to row i. A term with no rows keeps its start value (the data
 * bound it only from one side: term_n[j] = 0). Errors: ERR_CONVERGE. */
static int minfit(const char *what, const double *y, const double *c, size_t n, size_t m, double *theta,
                  double *theta_se, size_t *term_n, int *assign, err_t *e)
{
    for (size_t i = 0; i < n; i++) assign[i] = -1;
    for (int it = 0; it < FIT_MAX_ITER; it++) {
        bool changed = false;
        for (size_t i = 0; i < n; i++) {
            int best = -1;
            double bv = INFINITY;
            for (size_t j = 0; j < m; j++) {
                double cij = c[i * m + j];
                if (isnan(cij)) continue;
                double v = theta[j] + cij;
                if (v < bv - 1e-12) {
                    bv = v;
                    best = (int)j;
                }
            }
            if (best != assign[i]) changed = true;
            assign[i] = best;
        }
        if (!changed && it > 0) {
            for (size_t j = 0; j < m; j++) {
                term_n[j] = 0;
                for (size_t i = 0; i < n; i++) term_n[j] += assign[i] == (int)j;
                theta_se[j] = 0;
                if (term_n[j] < 2) continue;
                double *v = malloc(term_n[j] * sizeof *v);
                if (!v) return err_set(e, ERR_NOMEM, "fit %s: out of memory", what);
                size_t k = 0;
                for (size_t i = 0; i < n; i++)
                    if (assign[i] == (int)j) v[k++] = y[i] - c[i * m + j];
                double mean, se;
                int rc = lsq_mean(what, v, k, &mean, &se, e);
                free(v);
                if (rc) return rc;
                theta_se[j] = se;
            }
            return ERR_OK;
        }
        for (size_t j = 0; j < m; j++) {
            double s = 0;
            size_t k = 0;
            for (size_t i = 0; i < n; i++)
                if (assign[i] == (int)j) {
                    s += y[i] - c[i * m + j];
                    k++;
                }
            if (k) theta[j] = s / (double)k;
        }
    }
    return err_set(e, ERR_CONVERGE, "fit %s: did not converge (row assignment still changing after %d iterations)",
                   what, FIT_MAX_ITER);
}

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
static int fit_strided(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);

/* Copy-engine latency and bandwidth per direction. The profile has one ce_latency_us: it is the
 * H2D fit's (the direction on decode's critical path); D2H's own latency is noted. */
static int fit_ce(fit_t *f, const sel_t *rows, err_t *e)
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

typedef struct mixgrp {
    const kbrow_t *row[16];
    size_t n;
} mixgrp_t;

/* Groups consecutive mix rows of one file: a group starts at concurrent_id 0. */
static int mix_groups(const sel_t *rows, const char *policy, mixgrp_t **out, size_t *n_out)
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

static int fit_duplex(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
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


static int fit_per_piece(fit_t *f, const sel_t *rows, const calib_t *seed, int kind, const char *name,
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

/* ---- SM gather ------------------------------------------------------------------------------- */

/* Knot index of a region: exact knots (1%), below the first → 0, beyond the last → 3, else -1. */
static int knot_of(double region)
{
    if (!(region > 0)) return 0;
    if (region <= knot_bytes[0] * 1.01) return 0;
    if (region >= knot_bytes[3] * 0.99) return 3;
    for (int k = 1; k < 3; k++)
        if (fabs(log(region / knot_bytes[k])) < 0.01) return k;
    return -1;
}

/* Row rate (rows/s) at region from the four knots (log-log interpolation, flat outside). */
static double rows_at(const double *knot_ps, double region)
{
    if (!(region > knot_bytes[0])) return knot_ps[0];
    if (region >= knot_bytes[3]) return knot_ps[3];
    int k = 0;
    while (k < 2 && region > knot_bytes[k + 1]) k++;
    double t = log(region / knot_bytes[k]) / log(knot_bytes[k + 1] / knot_bytes[k]);
    return exp(log(knot_ps[k]) + t * (log(knot_ps[k + 1]) - log(knot_ps[k])));
}


/* 2D copies whose rows lie a chunk apart (kbench's index_fetch "ce2d": one copy per head and active
 * channel, a row per chunk, `pieces` copies): t - ce_latency - bytes/h2d = (copies-1)*copy + rows*page_row,
 * rows = copies * chunks, least squares in relative terms. The copies' issue and turn-around is the
 * chain's own (not the 1D back-to-back gap: each copy walks its rows' pages), and both terms are
 * determined where the runs span enough rows per copy (their standard errors say how well). */
static int fit_strided(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    sel_t s = {0};
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (is_op(r, OPKIND_INDEX_FETCH) && alone(r) && !strcmp(r->variant, "ce2d") && r->pieces > 1 &&
            r->chunk_tokens > 0 && r->n_tokens > 0 && r->bytes_moved > 0 && sel_add(&s, r))
            return free(s.v), err_set(e, ERR_NOMEM, "fit: out of memory");
    }
    if (s.n < 3) {
        note(f, "ce2d_copy_us, ce2d_page_row_ns: not determined (%zu strided 2D copy rows, 3 needed)", s.n);
        free(s.v);
        return ERR_OK;
    }
    double lat, h2d;
    int rc = value_of(f, seed, "ce_latency_us", &lat, e);
    if (!rc) rc = value_of(f, seed, "h2d_GBps", &h2d, e);
    double *X = malloc(2 * s.n * sizeof *X), *y = malloc(s.n * sizeof *y), *base = malloc(s.n * sizeof *base);
    double *pred = malloc(s.n * sizeof *pred), *meas = malloc(s.n * sizeof *meas), *nrows = malloc(s.n * sizeof *nrows);
    if (!rc && (!X || !y || !base || !pred || !meas || !nrows)) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    lsq_fit_t lf;
    if (!rc) {
        for (size_t i = 0; i < s.n; i++) {
            const kbrow_t *r = s.v[i];
            nrows[i] = r->pieces * ceil(r->n_tokens / r->chunk_tokens);
            base[i] = lat + r->bytes_moved / (h2d * 1e3);
            meas[i] = r->t_med_us;
            X[2 * i] = (r->pieces - 1) / meas[i];
            X[2 * i + 1] = nrows[i] / meas[i];
            y[i] = (meas[i] - base[i]) / meas[i];
        }
        rc = lsq_wlinear("ce2d_copy_us, ce2d_page_row_ns", X, y, NULL, s.n, 2, &lf, e);
    }
    if (!rc) {
        double copy = fmax(lf.coef[0], 0), row = fmax(lf.coef[1], 0), lo = INFINITY, hi = -INFINITY, clo = INFINITY,
               chi = -INFINITY;
        for (size_t i = 0; i < s.n; i++) {
            lo = fmin(lo, nrows[i]);
            hi = fmax(hi, nrows[i]);
            clo = fmin(clo, s.v[i]->pieces);
            chi = fmax(chi, s.v[i]->pieces);
            pred[i] = base[i] + (s.v[i]->pieces - 1) * copy + nrows[i] * row;
        }
        const char *how = "index_fetch ce2d: t - ce_latency - bytes/h2d = (copies-1)*copy + rows*page_row, "
                          "rows = copies*chunks, least squares in relative terms";
        put(f, "ce2d_copy_us", copy, lf.se[0], clo, chi, s.v, s.n, how);
        put(f, "ce2d_page_row_ns", row * 1e3, lf.se[1] * 1e3, lo, hi, s.v, s.n, how);
        resid(f, "ce_copy2d_strided", pred, meas, s.n);
    }
    free(X), free(y), free(base), free(pred), free(meas), free(nrows), free(s.v);
    return rc;
}

typedef struct gmodel {
    double lat_us, peak_GBps, block_GBps, rows_ps[4];
} gmodel_t;

/* The gather's rate (GB/s) for a row of the given shape. */
static double gather_rate(const gmodel_t *g, double row_bytes, double region, double blocks)
{
    double r = g->peak_GBps;
    if (blocks > 0) r = fmin(r, blocks * g->block_GBps);
    return fmin(r, rows_at(g->rows_ps, region) * row_bytes * 1e-9);
}

static int gather_model(const fit_t *f, const calib_t *seed, gmodel_t *g, err_t *e)
{
    int rc = value_of(f, seed, "gather_latency_us", &g->lat_us, e);
    if (!rc) rc = value_of(f, seed, "gather_peak_GBps", &g->peak_GBps, e);
    if (!rc) rc = value_of(f, seed, "gather_block_GBps", &g->block_GBps, e);
    for (int k = 0; k < 4 && !rc; k++) {
        rc = value_of(f, seed, knot_names[k], &g->rows_ps[k], e);
        g->rows_ps[k] *= 1e6;
    }
    return rc;
}

/* The cold share of n re-read rows: none up to warm rows, all from twice as many (log-linear). */
static double cold_share(double n, double lw)
{
    double x = log2(n) - lw;
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

/* A re-read gather's time with log2 warm rows lw: its cold rows at the region's row rate, the warm
 * ones at 256 MiB's (cost_gather_rows_per_s), under the peak and block ceilings. */
static double reread_us(const gmodel_t *g, const kbrow_t *r, double lw)
{
    double m = cold_share(r->pieces, lw), piece = r->bytes_moved / r->pieces;
    double rows_ps = 1.0 / ((1.0 - m) / g->rows_ps[0] + m / rows_at(g->rows_ps, r->region_bytes));
    double cap = g->peak_GBps;
    if (r->blocks > 0) cap = fmin(cap, r->blocks * g->block_GBps);
    return g->lat_us + r->bytes_moved / (fmin(cap, rows_ps * piece * 1e-9) * 1e3);
}

/* Re-read gathers by row count (link suite, variant v2_rows: 256 B rows, one set of rows read again
 * every repetition, regions past 256 MiB, where the cold share matters): the model's time against the
 * measured one, relative least squares over log2 warm on a 0.001 grid; its standard error from the
 * profile where SS <= SSmin·(1 + 1/(n-1)) (Delta chi^2 = 1, sigma^2 = SSmin/(n-1)). The ramp's width,
 * one doubling, is not fitted: the row counts measured are a doubling apart. */
static int fit_gather_tlb(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    sel_t s = {0};
    int rc = ERR_OK;
    double lo = INFINITY, hi = 0;
    for (size_t i = 0; i < rows->n && !rc; i++) {
        const kbrow_t *r = rows->v[i];
        if (is_op(r, OPKIND_SM_GATHER) && alone(r) && !strcmp(r->variant, "v2_rows") && r->pieces > 0 &&
            r->bytes_moved > 0 && r->region_bytes > 268435456.0 * 1.01 && r->t_med_us > 0) {
            rc = sel_add(&s, r);
            lo = fmin(lo, r->pieces);
            hi = fmax(hi, r->pieces);
        }
    }
    if (rc) return err_set(e, ERR_NOMEM, "fit: out of memory");
    if (s.n < 3) {
        note(f, "gather_warm_rows: not determined (%zu sm_gather v2_rows rows past 256 MiB)", s.n);
        free(s.v);
        return ERR_OK;
    }
    gmodel_t g;
    rc = gather_model(f, seed, &g, e);
    size_t ng = (size_t)ceil((log2(hi) - log2(lo)) / 0.001) + 1;
    double *ss = malloc(ng * sizeof *ss), best = INFINITY, bw = NAN;
    if (!rc && !ss) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    for (size_t a = 0; !rc && a < ng; a++) {
        double lw = log2(lo) + 0.001 * (double)a, v = 0;
        for (size_t i = 0; i < s.n; i++) v += pow(reread_us(&g, s.v[i], lw) / s.v[i]->t_med_us - 1, 2);
        ss[a] = v;
        if (v < best) best = v, bw = lw;
    }
    double wlo = INFINITY, whi = -INFINITY;
    for (size_t a = 0; !rc && a < ng; a++)
        if (ss[a] <= best * (1.0 + 1.0 / (double)(s.n - 1)) + 1e-12) {
            wlo = fmin(wlo, log2(lo) + 0.001 * (double)a);
            whi = fmax(whi, log2(lo) + 0.001 * (double)a);
        }
    free(ss);
    double *pred = malloc(s.n * sizeof *pred), *meas = malloc(s.n * sizeof *meas);
    if (!rc && (!pred || !meas)) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    if (!rc) {
        put(f, "gather_warm_rows", exp2(bw), exp2(bw) * log(2.0) * (whi - wlo) / 2, lo, hi, s.v, s.n,
            "re-read 256 B gathers past 256 MiB: cold share clamp(log2(rows/warm), 0, 1) at the region's row "
            "rate, the rest at 256 MiB's; relative least squares on a 0.001 grid of log2 warm, standard error "
            "from the profile at Delta chi^2 = 1");
        for (size_t i = 0; i < s.n; i++) {
            pred[i] = reread_us(&g, s.v[i], bw);
            meas[i] = s.v[i]->t_med_us;
        }
        resid(f, "sm_gather_reread_rows", pred, meas, s.n);
    }
    free(pred);
    free(meas);
    free(s.v);
    return rc;
}

/* The cold share of a link-suite gather of `variant`: re-read rows ("..._reread" or "..._flush"
 * after an L2 flush, "..._warm" back to back) as cold_share gives it; rows in a new set every
 * repetition, or with another gather between ("..._after"), all cold. */
static double variant_cold_share(const char *variant, double pieces, double warm_rows)
{
    bool reread = strstr(variant, "_reread") || strstr(variant, "_flush") || strstr(variant, "_warm");
    return reread ? cold_share(pieces, log2(warm_rows)) : 1;
}

/* Whether r is an SM gather row of `variant`, alone, at `region`. */
static bool gather_row_at(const kbrow_t *r, const char *variant, double region)
{
    return is_op(r, OPKIND_SM_GATHER) && alone(r) && !strcmp(r->variant, variant) &&
           fabs(log(r->region_bytes / region)) <= 0.01;
}

/* Whether the link suite has such rows (gather_row_at). */
static bool has_rows(const sel_t *rows, const char *variant, double region)
{
    for (size_t i = 0; i < rows->n; i++)
        if (gather_row_at(rows->v[i], variant, region)) return true;
    return false;
}

/* A knot's cold row rate (Mrows/s) from the link suite's rows of `variant` (256 B, or 512 B) at its
 * region: each row's time less the gather's fixed time, its cold share (gather_warm_rows) at the
 * knot's rate and the rest at the warm one (cost_gather_rows_per_s), where the rows bind (the time
 * past 1.1x the bytes at the peak); the mean over the rows. Writes the rows used; returns how many. */
static size_t knot_rows(const sel_t *rows, const char *variant, double region, const double g[4], double *v,
                        double *se, const kbrow_t **used, size_t max)
{
    double lat = g[0], peak = g[1], warm_rows = g[2], warm = g[3], sum = 0, sum2 = 0;
    size_t n = 0;
    for (size_t i = 0; i < rows->n && n < max; i++) {
        const kbrow_t *r = rows->v[i];
        if (!gather_row_at(r, variant, region) || !(r->pieces > 0)) continue;
        double busy = r->t_med_us - lat, m = variant_cold_share(variant, r->pieces, warm_rows);
        if (!(busy > 1.1 * r->bytes_moved / (peak * 1e3)) || !(m > 0)) continue;
        double cold = m / (busy / r->pieces - (1 - m) / warm);   /* us a row, so Mrows/s */
        if (!(cold > 0)) continue;
        sum += cold, sum2 += cold * cold;
        used[n++] = r;
    }
    *v = n ? sum / (double)n : NAN;
    *se = n > 1 ? sqrt(fmax(sum2 / (double)n - *v * *v, 0) / (double)(n - 1)) : 0;
    return n;
}

/* Knot k of `name` from the re-read rows of `variant` there (knot_rows), written with its
 * residuals; false (nothing written) without such rows. */
static bool knot_fit(fit_t *f, const sel_t *rows, const char *variant, const char *name, int k, const double g[4],
                     double *v)
{
    const kbrow_t *used[64];
    double se, pred[64], meas[64];
    size_t n = knot_rows(rows, variant, cost_row_knot_bytes[k], g, v, &se, used, 64);
    if (!n) return false;
    char how[200];
    snprintf(how, sizeof how, "%g B rows (%s): (t - gather_latency)/rows with the cold share "
             "(gather_warm_rows) at this rate and the rest at the 256 MiB knot's", used[0]->piece_bytes, variant);
    put(f, name, *v, se, NAN, NAN, used, n, how);
    for (size_t j = 0; j < n; j++) {
        double m = variant_cold_share(variant, used[j]->pieces, g[2]);
        pred[j] = g[0] + used[j]->pieces * ((1 - m) / g[3] + m / *v);
        meas[j] = used[j]->t_med_us;
    }
    char label[80];
    snprintf(label, sizeof label, "sm_gather_%s", name + strlen("gather_"));
    resid(f, label, pred, meas, n);
    return true;
}

/* Knot k of `name` from the rows of `variant` (knot_fit), else the value of knot `as` (derived). */
static void knot_or(fit_t *f, const sel_t *rows, const char *variant, const char *name, int k, const double g[4],
                    const char *as, double as_value, double *v)
{
    if (knot_fit(f, rows, variant, name, k, g, v)) return;
    char how[160];
    snprintf(how, sizeof how, "derived: as %s (no %s rows there that the row rate binds)", as, variant);
    *v = as_value;
    put(f, name, *v, 0, NAN, NAN, NULL, 0, how);
}

/* The row-rate knots the grid does not give (models/cost.h): between its knots (512 MiB, 2 and
 * 8 GiB) from re-read rows over the whole region (order_global_reread), else the geometric mean of
 * the neighbours (the log-linear curve between them); and each knot for rows read head by head
 * from a step's winner fetch of 65536 rows of 512 B re-read after an L2 flush (order_win4_flush:
 * HashAttention's, 4 x 2048 per head; the 16384 of the others' stay warm), else from 256 B rows
 * (order_heads_reread: 16 parts of the region in turn), else the knot of rows in any order (where nothing binds the row rate, or without such rows); head by head with a
 * new set every repetition (order_heads: every row cold), else the re-read head-by-head knot; and
 * the two re-read tables again from rows read back to back with no flush between, their page-table
 * entries still in L2 (order_global_warm, order_heads_warm), else the flushed knot; and the two
 * with another gather between repetitions (order_global_after, and for the rows head by head the
 * step suite's winner fetch after another gather and an L2 flush, order_win_after: 16384 rows of
 * 512 B, else the kernels suite's K/V winner rows, order_kv_after), every row cold, else the
 * flushed knot; and the step's winner fetch with each head's rows in a new order every repetition
 * after an L2 flush (order_win_shuffle: a step re-reading its winners as top-k hands them over),
 * every row at it, else the flushed head-by-head knot (every row cold, as before it was measured). */
static int fit_gather_knots(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    const char *const *any = cost_row_names[COST_ROWS_ANY], *const *heads_n = cost_row_names[COST_ROWS_HEADS];
    double g[4], knot[COST_ROW_KNOTS];
    int rc = value_of(f, seed, "gather_latency_us", &g[0], e);
    if (!rc) rc = value_of(f, seed, "gather_peak_GBps", &g[1], e);
    if (!rc) rc = value_of(f, seed, "gather_warm_rows", &g[2], e);
    for (int k = 0; k < COST_ROW_KNOTS && !rc; k++) rc = value_of(f, seed, any[k], &knot[k], e);
    if (rc) return rc;
    g[3] = knot[0];
    for (int k = 1; k < COST_ROW_KNOTS - 1; k += 2)
        if (!knot_fit(f, rows, "order_global_reread", any[k], k, g, &knot[k])) {
            knot[k] = sqrt(knot[k - 1] * knot[k + 1]);
            put(f, any[k], knot[k], 0, NAN, NAN, NULL, 0,
                "derived: the geometric mean of the neighbouring knots (a log-linear curve between them), no re-read "
                "rows there that the row rate binds");
        }
    double heads[COST_ROW_KNOTS], v;
    for (int k = 0; k < COST_ROW_KNOTS; k++)
        if (!knot_fit(f, rows, "order_win4_flush", heads_n[k], k, g, &heads[k]))
            knot_or(f, rows, "order_heads_reread", heads_n[k], k, g, any[k], knot[k], &heads[k]);
    for (int k = 0; k < COST_ROW_KNOTS; k++) {
        knot_or(f, rows, "order_heads", cost_row_names[COST_ROWS_HEADS_NEW][k], k, g, heads_n[k], heads[k], &v);
        knot_or(f, rows, "order_global_warm", cost_row_names[COST_ROWS_ANY_PT][k], k, g, any[k], knot[k], &v);
        knot_or(f, rows, "order_heads_warm", cost_row_names[COST_ROWS_HEADS_PT][k], k, g, heads_n[k], heads[k], &v);
        knot_or(f, rows, "order_global_after", cost_row_names[COST_ROWS_ANY_AFTER][k], k, g, any[k], knot[k], &v);
        if (!knot_fit(f, rows, "order_win_after", cost_row_names[COST_ROWS_HEADS_AFTER][k], k, g, &v))
            knot_or(f, rows, "order_kv_after", cost_row_names[COST_ROWS_HEADS_AFTER][k], k, g, heads_n[k], heads[k], &v);
        knot_or(f, rows, "order_win_shuffle", cost_row_names[COST_ROWS_HEADS_SHUFFLE][k], k, g, heads_n[k], heads[k], &v);
    }
    return ERR_OK;
}

/* The plane sweep's knots (models/cost.h: gather_plane<piece>_rows_Mps_<region>) from the link
 * suite's plane_sweep rows of that piece at that region: rows / (t - gather_latency) where the rows
 * bind (knot_rows); where the link binds them instead, as the warm rows' rate (the 256 MiB knot of
 * rows in any order: the row rate is at least what was measured, and the gather's ceilings then
 * bind a prefix fetch); without such rows (a run before the section), the curve of rows in any
 * order at that region, every row cold (as the fetch was priced before). */
static int fit_plane_knots(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    double g[4], any[COST_ROW_KNOTS];
    int rc = value_of(f, seed, "gather_latency_us", &g[0], e);
    if (!rc) rc = value_of(f, seed, "gather_peak_GBps", &g[1], e);
    if (!rc) rc = value_of(f, seed, "gather_warm_rows", &g[2], e);
    for (int k = 0; k < COST_ROW_KNOTS && !rc; k++) rc = value_of(f, seed, cost_row_names[COST_ROWS_ANY][k], &any[k], e);
    if (rc) return rc;
    g[3] = any[0];
    for (int p = 0; p < COST_PLANE_PIECES; p++) {
        char variant[32];
        snprintf(variant, sizeof variant, "plane_sweep_p%.0f", cost_plane_piece_bytes[p]);
        for (int k = 0; k < COST_PLANE_KNOTS; k++) {
            const char *name = cost_plane_names[p][k];
            const kbrow_t *used[64];
            double v, se, region = cost_plane_knot_bytes[k], pred[64], meas[64];
            size_t n = knot_rows(rows, variant, region, g, &v, &se, used, 64);
            if (n) {
                char how[160];
                snprintf(how, sizeof how, "%s rows: rows/(t - gather_latency) where the rows bind", variant);
                put(f, name, v, se, NAN, NAN, used, n, how);
                for (size_t j = 0; j < n; j++) {
                    pred[j] = g[0] + used[j]->pieces / v;
                    meas[j] = used[j]->t_med_us;
                }
                char label[80];
                snprintf(label, sizeof label, "sm_%s", name + strlen("gather_"));
                resid(f, label, pred, meas, n);
            } else if (has_rows(rows, variant, region)) {
                put(f, name, g[3], 0, NAN, NAN, NULL, 0,
                    "derived: as gather_rows_Mps_256MiB (the link binds the plane_sweep rows here, not their rate)");
            } else {
                put(f, name, cost_knots_rate(cost_row_knot_bytes, any, COST_ROW_KNOTS, region), 0, NAN, NAN, NULL, 0,
                    "derived: the gather_rows_Mps_ curve at this region (no plane_sweep rows: every row cold, in any order)");
            }
        }
    }
    return ERR_OK;
}

/* The SM index fetch (kbench's prefix kernel: index_fetch rows of variant sm): t = lat + bytes/(eff·R),
 * R the gather's rate min(peak, blocks·block) for its rows (at n ≤ 256K the prefixes, ≥ 200 B over
 * ≤ 256 MiB, leave the row rate unbound), WLS 1/t²: the intercept and the slope's inverse. */
static int fit_prefix(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    sel_t s = {0};
    int rc = ERR_OK;
    for (size_t i = 0; i < rows->n && !rc; i++) {
        const kbrow_t *r = rows->v[i];
        if (is_op(r, OPKIND_INDEX_FETCH) && alone(r) && !strcmp(r->variant, "sm") && r->bytes_moved > 0 && r->t_med_us > 0)
            rc = sel_add(&s, r);
    }
    if (rc) return err_set(e, ERR_NOMEM, "fit: out of memory");
    gmodel_t g;
    rc = gather_model(f, seed, &g, e);
    if (!rc && s.n < 3) note(f, "prefix_gather_*: not determined (%zu index_fetch sm rows)", s.n);
    double *X = malloc(2 * s.n * sizeof *X + 1), *y = malloc(s.n * sizeof *y + 1), *w = malloc(s.n * sizeof *w + 1);
    double *pred = malloc(s.n * sizeof *pred + 1);
    if (!rc && (!X || !y || !w || !pred)) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    lsq_fit_t lf;
    for (size_t i = 0; !rc && s.n >= 3 && i < s.n; i++) {
        const kbrow_t *r = s.v[i];
        double R = r->blocks > 0 ? fmin(g.peak_GBps, r->blocks * g.block_GBps) : g.peak_GBps;
        X[2 * i] = 1;
        X[2 * i + 1] = r->bytes_moved / (R * 1e3);   /* µs at the gather's rate */
        y[i] = r->t_med_us;
        w[i] = 1.0 / (y[i] * y[i]);
    }
    if (!rc && s.n >= 3) rc = lsq_wlinear("SM index fetch t = lat + bytes/(eff*R)", X, y, w, s.n, 2, &lf, e);
    if (!rc && s.n >= 3) {
        double lo, hi, eff = 1.0 / lf.coef[1];
        range_of(&s, get_bytes, &lo, &hi);
        put(f, "prefix_gather_latency_us", lf.coef[0] > 0 ? lf.coef[0] : 0, lf.se[0], lo, hi, s.v, s.n,
            "SM index fetch t = lat + bytes/(eff*gather rate), WLS 1/t^2 (the intercept)");
        put(f, "prefix_gather_eff", eff, lf.se[1] * eff * eff, lo, hi, s.v, s.n,
            "SM index fetch t = lat + bytes/(eff*gather rate), WLS 1/t^2 (the slope's inverse)");
        for (size_t i = 0; i < s.n; i++) pred[i] = lf.coef[0] + lf.coef[1] * X[2 * i + 1];
        resid(f, "index_fetch_sm", pred, y, s.n);
    }
    free(X);
    free(y);
    free(w);
    free(pred);
    free(s.v);
    return rc;
}

/* A plane scan reading its index straight from host memory (kernels-suite scan rows of Fathom or
 * SparQ on the host, one query head): the prefixes the SM index fetch reads, at zc_scan_eff times
 * its rate: t - prefix_lat = x/zc with x = idx / (prefix_eff*R), idx the row's bytes less its
 * scores (4 B per head and token), R the gather's rate min(peak, gather_blocks*block); least
 * squares with weights 1/x (a row's error grows with its time), which is Σx/Σ(t - lat): the rows
 * that move bytes decide it, not the 4K rows whose time is nearly all fixed (their ratios ranged
 * 0.66-1.76 between runs, and their mean with them). */
static int fit_zc_scan(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    sel_t s = {0};
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        int kind = method_find(r->variant);
        bool planes = kind >= 0 && method_ops_at(kind)->query_dependent;
        if (is_op(r, OPKIND_SCAN) && alone(r) && planes && !strcmp(r->placement, "host") && !(r->qheads > 1) &&
            r->heads > 0 && r->n_tokens > 0 && r->t_med_us > 0 && sel_add(&s, r))
            return free(s.v), err_set(e, ERR_NOMEM, "fit: out of memory");
    }
    gmodel_t g;
    double lat, eff, blocks;
    int rc = gather_model(f, seed, &g, e);
    if (!rc) rc = value_of(f, seed, "prefix_gather_latency_us", &lat, e);
    if (!rc) rc = value_of(f, seed, "prefix_gather_eff", &eff, e);
    if (!rc) rc = value_of(f, seed, "gather_blocks", &blocks, e);
    double *x = malloc(s.n * sizeof *x + 1), *busy = malloc(s.n * sizeof *busy + 1), *w = malloc(s.n * sizeof *w + 1);
    double *pred = malloc(s.n * sizeof *pred + 1), *meas = malloc(s.n * sizeof *meas + 1);
    if (!rc && (!x || !busy || !w || !pred || !meas)) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    size_t n = 0;
    double R = fmin(g.peak_GBps, blocks * g.block_GBps) * 1e3;   /* bytes per us */
    for (size_t i = 0; !rc && i < s.n; i++) {
        const kbrow_t *r = s.v[i];
        double idx = r->bytes_moved - 4.0 * r->heads * r->n_tokens;
        if (idx > 0 && r->t_med_us > lat) {
            x[n] = idx / (eff * R);
            busy[n] = r->t_med_us - lat;
            w[n] = 1 / x[n];
            s.v[n++] = r;
        }
    }
    if (!rc && !n) note(f, "zc_scan_eff: not determined (no plane scan rows from host)");
    lsq_fit_t lf;
    if (!rc && n) rc = lsq_wlinear("zc_scan_eff", x, busy, w, n, 1, &lf, e);
    if (!rc && n) {
        double v = 1 / lf.coef[0], se = lf.se[0] / (lf.coef[0] * lf.coef[0]);
        double lo = INFINITY, hi = 0;
        for (size_t i = 0; i < n; i++) {
            double idx = s.v[i]->bytes_moved - 4.0 * s.v[i]->heads * s.v[i]->n_tokens;
            lo = fmin(lo, idx), hi = fmax(hi, idx);
            pred[i] = lat + x[i] / v;
            meas[i] = s.v[i]->t_med_us;
        }
        put(f, "zc_scan_eff", v, se, lo, hi, s.v, n,
            "plane scans from host: t - prefix_gather_latency = (index bytes/(prefix_gather_eff*gather rate))/eff, WLS 1/x "
            "(sum of x over sum of t - latency)");
        resid(f, "scan_zero_copy_planes", pred, meas, n);
    }
    free(x), free(busy), free(w), free(pred), free(meas), free(s.v);
    return rc;
}

static bool has_variant(const sel_t *rows, int kind, const char *variant)
{
    for (size_t i = 0; i < rows->n; i++)
        if (is_op(rows->v[i], kind) && !strcmp(rows->v[i]->variant, variant)) return true;
    return false;
}

/* A gather's fixed time, from kbench's payload sweep (variant "v2_payload": 4 KiB pieces over 256 MiB,
 * where neither the row rate nor the blocks bind, payloads 64 KiB-64 MiB): t = lat + payload/rate,
 * WLS 1/t². The rate is the grid fit's (fit_gather) to set; only the fixed time is kept. */
static int fit_gather_latency(fit_t *f, const sel_t *rows, err_t *e)
{
    sel_t s = {0};
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (is_op(r, OPKIND_SM_GATHER) && alone(r) && !strcmp(r->variant, "v2_payload") && r->bytes_moved > 0 &&
            sel_add(&s, r))
            return free(s.v), err_set(e, ERR_NOMEM, "fit: out of memory");
    }
    if (s.n < 3) {
        free(s.v);
        return ERR_OK;
    }
    lsq_fit_t lf;
    err_t e2;
    int lrc = line_of(&s, get_bytes, "gather t = lat + payload/rate", &lf, &e2);
    if (lrc == ERR_NOMEM) return free(s.v), err_set(e, ERR_NOMEM, "fit: out of memory");
    if (!lrc && lf.coef[1] > 0) {
        double lo, hi;
        range_of(&s, get_bytes, &lo, &hi);
        put(f, "gather_latency_us", fmax(lf.coef[0], 0), lf.se[0], lo, hi, s.v, s.n,
            "sm_gather payload sweep (4 KiB pieces over 256 MiB): t = lat + payload/rate, WLS 1/t^2");
        note(f, "gather payload sweep: %.3g GB/s between 64 KiB and 64 MiB (the rate is the grid fit's)",
             1e-3 / lf.coef[1]);
    } else {
        note(f, "gather_latency_us: not determined (%zu payload-sweep rows without a positive slope)", s.n);
    }
    free(s.v);
    return ERR_OK;
}

static int fit_gather(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    sel_t all = {0}, s = {0};
    int rc = ERR_OK;
    for (size_t i = 0; i < rows->n && !rc; i++) {
        const kbrow_t *r = rows->v[i];
        if (is_op(r, OPKIND_SM_GATHER) && alone(r) && r->bytes_moved > 0 && r->piece_bytes > 0)
            rc = sel_add(&all, r);
    }
    if (!all.n || rc) {
        free(all.v);
        if (rc) return err_set(e, ERR_NOMEM, "fit: out of memory");
        note(f, "gather_*: not determined (no sm_gather rows in the fit set)");
        return ERR_OK;
    }
    const char *alloc = mode_of(&all, get_alloc);
    sel_t va = {0};
    for (size_t i = 0; i < all.n && !rc; i++)
        if (!strcmp(all.v[i]->allocator, alloc)) rc = sel_add(&va, all.v[i]);
    const char *variant = mode_of(&va, get_variant);
    free(va.v);
    for (size_t i = 0; i < all.n && !rc; i++)
        if (!strcmp(all.v[i]->allocator, alloc) && !strcmp(all.v[i]->variant, variant) &&
            knot_of(all.v[i]->region_bytes) >= 0)
            rc = sel_add(&s, all.v[i]);
    gmodel_t g;
    if (!rc) rc = gather_model(f, seed, &g, e);
    else rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    enum { T_PEAK, T_BLOCK, T_K0, M_TERMS = T_K0 + 4 };
    double *y = malloc(s.n * sizeof *y), *c = malloc(s.n * M_TERMS * sizeof *c);
    int *assign = malloc(s.n * sizeof *assign);
    if (!rc && (!y || !c || !assign)) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    double theta[M_TERMS], theta_se[M_TERMS];
    size_t term_n[M_TERMS];
    size_t n = 0;
    if (!rc) {
        /* log rate (GB/s) = min(log peak, log block + log blocks, log rows_GHz_k + log row_bytes) */
        for (int j = 0; j < M_TERMS; j++) theta[j] = -INFINITY;
        for (size_t i = 0; i < s.n; i++) {
            const kbrow_t *r = s.v[i];
            double t = r->t_med_us - g.lat_us;
            if (!(t > 0)) continue;
            s.v[n] = r;
            y[n] = log(r->bytes_moved / t * 1e-3);
            double *ci = &c[n * M_TERMS];
            for (int j = 0; j < M_TERMS; j++) ci[j] = NAN;
            ci[T_PEAK] = 0;
            if (r->blocks > 0) ci[T_BLOCK] = log(r->blocks);
            ci[T_K0 + knot_of(r->region_bytes)] = log(r->piece_bytes);
            for (int j = 0; j < M_TERMS; j++)   /* start from the upper bounds: the data's maxima */
                if (!isnan(ci[j]) && y[n] - ci[j] > theta[j]) theta[j] = y[n] - ci[j];
            n++;
        }
        s.n = n;
        if (n < 2) {
            note(f, "gather_*: not determined (%zu usable sm_gather rows)", n);
        } else {
            rc = minfit("sm_gather rate = min(peak, blocks*block, rows(region)*row_bytes)", y, c, n, M_TERMS,
                        theta, theta_se, term_n, assign, e);
        }
    }
    if (!rc && n >= 2) {
        char how[256];
        snprintf(how, sizeof how,
                 "sm_gather %s %s: rate = min(peak, blocks*block, rows(region)*row_bytes), log-space LS "
                 "by binding term; gather_latency %.3g us held fixed (%s)", alloc, variant, g.lat_us,
                 fit_find(f, "gather_latency_us") ? "fitted on the payload sweep" : "every gather moves the same bytes");
        static const char *const tnames[3] = {"gather_peak_GBps", "gather_block_GBps", NULL};
        for (int j = 0; j < M_TERMS; j++) {
            const char *name = j < T_K0 ? tnames[j] : knot_names[j - T_K0];
            if (!term_n[j]) {
                if (isfinite(theta[j]))
                    note(f, "%s: not determined (no row bound by it; the data only bound it below: >= %.4g%s)", name,
                         j < T_K0 ? exp(theta[j]) : exp(theta[j]) * 1e3, j < T_K0 ? " GB/s" : " Mrows/s");
                else
                    note(f, "%s: not determined (no rows)", name);
                continue;
            }
            /* Origin: the rows it binds; range: every row it applies to (it was checked there). */
            sel_t t = {0}, applies = {0};
            for (size_t i = 0; i < n && !rc; i++) {
                if (assign[i] == j) rc = sel_add(&t, s.v[i]);
                if (!rc && !isnan(c[i * M_TERMS + j])) rc = sel_add(&applies, s.v[i]);
            }
            if (rc) {
                free(t.v);
                free(applies.v);
                rc = err_set(e, ERR_NOMEM, "fit: out of memory");
                break;
            }
            double lo, hi;
            range_of(&applies, j == T_BLOCK ? get_blocks : get_piece, &lo, &hi);
            free(applies.v);
            double v = exp(theta[j]) * (j < T_K0 ? 1.0 : 1e3);   /* G rows/s → M rows/s */
            put(f, name, v, v * theta_se[j], lo, hi, t.v, t.n, how);
            free(t.v);
        }
        if (fit_find(f, "gather_latency_us"))
            note(f, "gather rates fitted given the payload sweep's fixed time %.3g us", g.lat_us);
        else
            note(f, "gather_latency_us: not identifiable (every gather row moves the same payload, so a fixed time "
                    "and the rate are one parameter); the preset's %.3g us is kept and the rates are fitted given it",
                 g.lat_us);
        /* The blocks kbench's grid gives a gather (the configuration the kernels use). */
        double most = 0;
        size_t most_n = 0;
        for (size_t i = 0; i < n; i++) {
            size_t k = 0;
            for (size_t j = 0; j < n; j++) k += s.v[j]->blocks == s.v[i]->blocks;
            if (k > most_n && s.v[i]->blocks > 0) {
                most_n = k;
                most = s.v[i]->blocks;
            }
        }
        if (most > 0) {
            sel_t t = {0};
            for (size_t i = 0; i < n && !rc; i++)
                if (s.v[i]->blocks == most) rc = sel_add(&t, s.v[i]);
            if (!rc) put(f, "gather_blocks", most, 0, 1, 0, t.v, t.n, "the blocks per gather of kbench's grid (configuration)");
            else rc = err_set(e, ERR_NOMEM, "fit: out of memory");
            free(t.v);
        }
    }
    if (!rc && n >= 2) rc = gather_model(f, seed, &g, e);
    if (!rc && n >= 2) {
        /* Residuals of the main allocator's rows, and of each other allocator under the same model. */
        double *pred = malloc(all.n * sizeof *pred), *meas = malloc(all.n * sizeof *meas);
        if (!pred || !meas) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
        for (size_t pass = 0; !rc && pass < all.n; pass++) {
            const char *a = all.v[pass]->allocator;
            bool first = true;
            for (size_t j = 0; j < pass && first; j++) first = strcmp(all.v[j]->allocator, a) != 0;
            if (!first) continue;
            size_t k = 0;
            for (size_t i = 0; i < all.n; i++) {
                const kbrow_t *r = all.v[i];
                if (strcmp(r->allocator, a) || strcmp(r->variant, variant)) continue;
                double rate = gather_rate(&g, r->piece_bytes, r->region_bytes, r->blocks);
                pred[k] = g.lat_us + r->bytes_moved / (rate * 1e3);
                meas[k++] = r->t_med_us;
            }
            char name[160];
            snprintf(name, sizeof name, "sm_gather_%s%s", a, strcmp(a, alloc) ? "_not_fitted" : "");
            resid(f, name, pred, meas, k);
        }
        free(pred);
        free(meas);
    }
    free(y);
    free(c);
    free(assign);
    free(s.v);
    free(all.v);
    return rc;
}

/* ---- sharing between paths: weights and the gather's duplex coefficient ------------------- */

static int fit_sharing(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    gmodel_t g;
    double h2d, d2h, dup, lat;
    int rc = gather_model(f, seed, &g, e);
    if (!rc) rc = value_of(f, seed, "h2d_GBps", &h2d, e);
    if (!rc) rc = value_of(f, seed, "d2h_GBps", &d2h, e);
    if (!rc) rc = value_of(f, seed, "duplex_GBps", &dup, e);
    if (!rc) rc = value_of(f, seed, "ce_latency_us", &lat, e);
    if (rc) return rc;
    static const char *const pols[2] = {"mix:copy+gather", "mix:gather+d2h"};
    double wv[128], cv[128];
    size_t nw = 0, nc = 0, nu_w = 0, nu_c = 0;
    const kbrow_t *used_w[256], *used_c[256];
    for (int pi = 0; pi < 2; pi++) {
        mixgrp_t *gr;
        size_t ng;
        if (mix_groups(rows, pols[pi], &gr, &ng)) return err_set(e, ERR_NOMEM, "fit: out of memory");
        for (size_t i = 0; i < ng && nw < 128; i++) {
            if (gr[i].n != 2) continue;
            const kbrow_t *gw = NULL, *cw = NULL;
            for (int k = 0; k < 2; k++) {
                if (is_op(gr[i].row[k], OPKIND_SM_GATHER)) gw = gr[i].row[k];
                else if (is_op(gr[i].row[k], OPKIND_H2D_COPY) || is_op(gr[i].row[k], OPKIND_D2H_COPY)) cw = gr[i].row[k];
            }
            if (!gw || !cw) continue;
            bool d2h_copy = is_op(cw, OPKIND_D2H_COPY);
            double G = gather_rate(&g, gw->piece_bytes, gw->region_bytes, gw->blocks) * 1e3; /* bytes/us */
            double C = (d2h_copy ? d2h : h2d) * 1e3;
            double tg = gw->t_med_us - g.lat_us, tc = cw->t_med_us - lat;
            double rg, rc_;
            if (!(tg > 0) || !(tc > 0)) continue;
            if (tg <= tc) {
                rg = gw->bytes_moved / tg;
                rc_ = (cw->bytes_moved - C * (tc - tg)) / tg;
            } else {
                rc_ = cw->bytes_moved / tc;
                rg = (gw->bytes_moved - G * (tg - tc)) / tc;
            }
            if (!(rg > 0) || !(rc_ > 0)) continue;
            if (rg < 0.9 * G) {            /* the gather ran clearly below its own cap: the weights split */
                wv[nw++] = log(rg / rc_);
                used_w[nu_w++] = gw;
                used_w[nu_w++] = cw;
            }
            if (d2h_copy && rc_ < 0.9 * C && nc < 128) { /* the duplex total bound the pair */
                cv[nc++] = (dup * 1e3 - rc_) / rg;
                used_c[nu_c++] = gw;
                used_c[nu_c++] = cw;
            }
        }
        free(gr);
    }
    if (nw) {
        double m, se = 0;
        rc = lsq_mean("gather_weight", wv, nw, &m, &se, e);
        if (rc) return rc;
        double v = exp(m);
        put(f, "gather_weight", v, v * se, 1, 0, used_w, nu_w,
            "ratio of the gather's to the copy's rate while both run (ce_weight = 1: only the ratio is identifiable)");
        put(f, "ce_weight", 1.0, 0, 1, 0, used_w, nu_w, "reference weight, fixed: weights are identifiable only as a ratio");
        double pred[128], meas[128];
        for (size_t i = 0; i < nw; i++) {
            pred[i] = v;
            meas[i] = exp(wv[i]);
        }
        resid(f, "sharing_weight_ratio", pred, meas, nw);
    } else {
        note(f, "gather_weight, ce_weight: not determined (no copy+gather overlap with the gather below its cap)");
    }
    if (nc) {
        double m, se = 0;
        rc = lsq_mean("gather_duplex_coef", cv, nc, &m, &se, e);
        if (rc) return rc;
        if (m <= 0) {
            note(f, "gather_duplex_coef: the fit gave %.3g (<= 0); not written", m);
        } else {
            put(f, "gather_duplex_coef", m, se, 1, 0, used_c, nu_c,
                "gather + D2H at once: coef = (duplex - d2h rate)/gather rate during the overlap");
            double pred[128], meas[128];
            for (size_t i = 0; i < nc; i++) {
                pred[i] = m;
                meas[i] = cv[i];
            }
            resid(f, "gather_duplex_coef", pred, meas, nc);
        }
    } else {
        note(f, "gather_duplex_coef: not determined (no gather + D2H overlap bound by the duplex total)");
    }
    return ERR_OK;
}

/* ---- HBM kernels ----------------------------------------------------------------------------- */

static bool is_hbm_kernel(int op)
{
    return op == OPKIND_QUANTIZE || op == OPKIND_WF_PLAN || op == OPKIND_SCAN || op == OPKIND_ATTN_SPARSE ||
           op == OPKIND_ATTN_DENSE || op == OPKIND_ATTN_TAIL || op == OPKIND_WINNER_FETCH;
}

/* Top-k of k over `heads` rows of n_tokens scores (kbench's radix select), the cost form's terms
 * (models/cost.h): t = lat_l2 + elem_l2·x + row_l2·rows with the scores in L2, lat + elem·x +
 * row·rows without, + winner·w + winner_row·w1, x the scores per block (blocks per row from the
 * grid's configuration), w the rows' warps holding a winner, w1 one row's (its atomics on its one
 * counter queue while the rows run side by side); WLS 1/t². A regime without rows keeps the
 * other's fixed time and per-score time. A time per row or per winner the rows do not determine
 * (the design singular, or its standard error over half of it: the runs before kbench 3e7ae2b read
 * HBM only at scores per block proportional to their rows) is left out of the fit and held at 0, and
 * so is one row's winner chain where the time per row from HBM is. Each regime
 * its own fixed time: each pass over scores from HBM waits for its first bytes longer (on the
 * 14:50 run 61 us against 36 from L2; one fixed time for both had put the step's top-k over 8 rows
 * of 2M-4M 7-10% fast). */
enum { TK_LAT_L2, TK_LAT, TK_L2, TK_HBM, TK_ROW_L2, TK_ROW, TK_WIN, TK_WIN_ROW, TK_TERMS };

static void topk_terms(const cost_t *c, const kbrow_t *r, double *row)
{
    double n = r->n_tokens, rows = r->heads, x = ceil(n / cost_topk_blocks_per_row(c, rows, n));
    bool l2 = 4.0 * rows * n <= c->l2_bytes;
    row[TK_LAT_L2] = l2 ? 1 : 0;
    row[TK_LAT] = l2 ? 0 : 1;
    row[TK_L2] = l2 ? x : 0;
    row[TK_HBM] = l2 ? 0 : x;
    row[TK_ROW_L2] = l2 ? rows : 0;
    row[TK_ROW] = l2 ? 0 : rows;
    row[TK_WIN_ROW] = cost_topk_winner_warps(n, r->k);
    row[TK_WIN] = rows * row[TK_WIN_ROW];
}

/* The terms a fit may leave out (held at 0) when the rows do not determine them. */
static bool tk_optional_term(int j) { return j == TK_ROW || j == TK_ROW_L2 || j == TK_WIN || j == TK_WIN_ROW; }

/* WLS over the columns `use` marks (col[] their term ids, *p their count); drops undetermined
 * optional terms from `use` and refits. Returns whether a fit stands in *tf. */
static bool topk_wls(fit_t *f, const double *terms, const double *m, const double *w, size_t n, bool *use,
                     const char *how, int *col, int *p, double *X, lsq_fit_t *tf)
{
    static const char *const opt_names[TK_TERMS] = {[TK_ROW_L2] = "topk_row_l2_us", [TK_ROW] = "topk_row_us",
                                                    [TK_WIN] = "topk_winner_ns", [TK_WIN_ROW] = "topk_winner_row_ns"};
    static const double opt_scale[TK_TERMS] = {[TK_ROW_L2] = 1, [TK_ROW] = 1, [TK_WIN] = 1e3, [TK_WIN_ROW] = 1e3};
    for (;;) {
        *p = 0;
        for (int j = 0; j < TK_TERMS; j++)
            if (use[j]) col[(*p)++] = j;
        for (size_t i = 0; i < n; i++)
            for (int j = 0; j < *p; j++) X[i * (size_t)*p + j] = terms[i * TK_TERMS + col[j]];
        err_t e2;
        bool ok = n > (size_t)*p && *p > 1 && !lsq_wlinear(how, X, m, w, n, (size_t)*p, tf, &e2);
        /* a singular design loses the time per row from HBM first (the earlier runs' rows tell the
         * L2's apart); else the least determined optional term under twice its error */
        int drop = -1, at = -1;
        double worst = INFINITY;
        for (int j = 0; j < *p; j++) {
            double z = ok ? tf->coef[j] / tf->se[j] : col[j] == TK_ROW ? -INFINITY : -1;
            if (tk_optional_term(col[j]) && !(z > 2) && !(z >= worst)) drop = col[j], at = j, worst = z;
        }
        /* one row's winner chain needs the time per row from HBM beside it: without that, the
         * winners summed over the rows stand in for the rows' own time, and the chain, the same at
         * every row count, bends the time per score instead (the runs before kbench 3e7ae2b) */
        if (drop < 0 && use[TK_WIN_ROW] && !use[TK_ROW]) {
            use[TK_WIN_ROW] = false;
            note(f, "topk_winner_row_ns: not told apart without the time per row from HBM; held at 0");
            continue;
        }
        if (drop < 0) return ok;
        use[drop] = false;
        if (ok) note(f, "%s: %.3g +- %.2g not determined by the rows; held at 0", opt_names[drop],
                     tf->coef[at] * opt_scale[drop], tf->se[at] * opt_scale[drop]);
        else note(f, "%s: not determined by the rows (their design singular with it); held at 0", opt_names[drop]);
    }
}

static int fit_topk(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    cost_t c = {0};
    int rc = value_of(f, seed, "topk_block_elems", &c.topk_block_elems, e);
    if (!rc) rc = value_of(f, seed, "topk_blocks_per_sm", &c.topk_blocks_per_sm, e);
    if (!rc) rc = value_of(f, seed, "sm_count", &c.sm_count, e);
    if (!rc) rc = value_of(f, seed, "l2_bytes", &c.l2_bytes, e);
    if (rc) return rc;
    sel_t t = {0};
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (is_op(r, OPKIND_TOPK) && alone(r) && r->heads > 0 && r->n_tokens > 0 && r->k > 0 && sel_add(&t, r))
            return free(t.v), err_set(e, ERR_NOMEM, "fit: out of memory");
    }
    static const char *const names[TK_TERMS] = {"topk_latency_l2_us", "topk_latency_us", "topk_elem_l2_ns", "topk_elem_ns",
                                                "topk_row_l2_us", "topk_row_us", "topk_winner_ns", "topk_winner_row_ns"};
    static const double scale[TK_TERMS] = {1, 1, 1e3, 1e3, 1, 1, 1e3, 1e3};   /* us per unit -> the parameter's unit */
    double *terms = malloc((t.n + 1) * TK_TERMS * sizeof *terms), *X = malloc((t.n + 1) * TK_TERMS * sizeof *X);
    double *m = malloc((t.n + 1) * sizeof *m), *w = malloc((t.n + 1) * sizeof *w), *pred = malloc((t.n + 1) * sizeof *pred);
    if (!terms || !X || !m || !w || !pred) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    /* the terms the rows exercise: a column of zeros cannot be fitted */
    int col[TK_TERMS], p = 0;
    bool use[TK_TERMS] = {false};
    for (size_t i = 0; !rc && i < t.n; i++) topk_terms(&c, t.v[i], &terms[i * TK_TERMS]);
    for (size_t i = 0; !rc && i < t.n; i++) {
        m[i] = t.v[i]->t_med_us;
        w[i] = 1.0 / (m[i] * m[i]);
        for (int j = 0; j < TK_TERMS; j++) use[j] |= terms[i * TK_TERMS + j] > 0;
    }
    static const char how[] = "topk: t = (lat_l2 + elem_l2*x + row_l2*rows)*[scores in L2] + (lat + elem*x + "
                              "row*rows)*[not] + winner*w + winner_row*w1, x the scores per block (blocks per row "
                              "from the radix select's grid configuration), w the rows' warps holding a winner, w1 "
                              "one row's, WLS 1/t^2";
    lsq_fit_t tf;
    bool ok = !rc && topk_wls(f, terms, m, w, t.n, use, how, col, &p, X, &tf);
    for (int j = 0; ok && j < p; j++) ok = tf.coef[j] > 0 || col[j] == TK_LAT || col[j] == TK_LAT_L2;
    if (!ok) {
        if (!rc) note(f, "topk_latency_us, topk_elem_ns, topk_elem_l2_ns: not determined (%zu topk rows without "
                         "positive per-score times)", t.n);
    } else {
        double v[TK_TERMS] = {0}, se[TK_TERMS] = {0};
        bool have[TK_TERMS] = {false};
        for (int j = 0; j < p; j++) v[col[j]] = tf.coef[j], se[col[j]] = tf.se[j], have[col[j]] = true;
        v[TK_LAT] = fmax(v[TK_LAT], 0);
        v[TK_LAT_L2] = fmax(v[TK_LAT_L2], 0);
        for (int j = 0; j < TK_TERMS; j++) {
            bool lat = j == TK_LAT || j == TK_LAT_L2;
            double lo = INFINITY, hi = -INFINITY;   /* the predictor: scores per block, rows, or warps with a winner */
            for (size_t i = 0; i < t.n; i++) {
                double x = terms[i * TK_TERMS + j];
                if (x <= 0) continue;
                if (lat) x = terms[i * TK_TERMS + (j == TK_LAT ? TK_HBM : TK_L2)];
                lo = fmin(lo, x), hi = fmax(hi, x);
            }
            if (have[j]) {
                put(f, names[j], v[j] * scale[j], se[j] * scale[j], lo, hi, t.v, t.n, how);
            } else if (lat || j == TK_L2 || j == TK_HBM) {
                int other = j == TK_L2 ? TK_HBM : j == TK_HBM ? TK_L2 : j == TK_LAT ? TK_LAT_L2 : TK_LAT;
                v[j] = v[other];
                put(f, names[j], v[j] * scale[j], se[other] * scale[j], NAN, NAN, t.v, t.n, how);
                note(f, "%s: no row in its regime; held at %s", names[j], names[other]);
            } else if (tk_optional_term(j)) {
                put(f, names[j], 0, 0, NAN, NAN, NULL, 0, "derived: 0, not determined by the top-k rows (the fit's notes)");
            }
        }
        for (size_t i = 0; i < t.n; i++) {
            pred[i] = 0;
            for (int j = 0; j < TK_TERMS; j++) pred[i] += v[j] * terms[i * TK_TERMS + j];
        }
        resid(f, "kernel_topk", pred, m, t.n);
    }
    free(terms), free(X), free(m), free(w), free(pred), free(t.v);
    return rc;
}

/* An HBM kernel kind the catalogs give parameters of its own but the fit set no rows (the winner
 * fetch from HBM on the runs before the kernels suite timed it): the pooled line's, as before it
 * had parameters of its own, so that the preset's assumed values do not stand in for a fit. */
static void pooled_where_no_rows(fit_t *f, const sel_t *rows, int op, double lat, double eff)
{
    char nl[64], ne[64];
    snprintf(nl, sizeof nl, "%s_latency_us", opkind_name(op));
    snprintf(ne, sizeof ne, "%s_mem_eff", opkind_name(op));
    if (!is_hbm_kernel(op) || !hwcat_param_unit(nl) || !hwcat_param_unit(ne) || fit_find(f, nl)) return;
    for (size_t i = 0; i < rows->n; i++)
        if (rows->v[i]->op == op && strcmp(rows->v[i]->placement, "host")) return;
    put(f, nl, lat, 0, NAN, NAN, NULL, 0, "derived: as kernel_latency_us (no fit-set rows of its own)");
    put(f, ne, eff, 0, NAN, NAN, NULL, 0, "derived: as kernel_mem_eff (no fit-set rows of its own)");
}

/* kbench's numbered kernel variants other than the one its steps run ("full;kernel1"): comparisons of
 * implementations, not the kernel the simulator models. */
static bool other_kernel(const kbrow_t *r) { return strstr(r->layout, ";kernel") != NULL; }

/* kbench's attention over each query head's own winners (";qh": g = 1 over the query heads, the
 * HashAttention step's shape), a kernel shape fitted apart (fit_attn_qh). */
static bool qh_attn(const kbrow_t *r) { return r->op == OPKIND_ATTN_SPARSE && strstr(r->layout, ";qh") != NULL; }

/* t = lat + slope·max(bytes, fill) with the slope fixed: lat is the mean of t − slope·max(bytes, fill)
 * over rows s, weights 1/t² as the line's. */
static void fixed_eff_fit(const sel_t *s, double slope, double fill, lsq_fit_t *of)
{
    double sw = 0, swy = 0, ss = 0;
    for (size_t j = 0; j < s->n; j++) {
        double t = s->v[j]->t_med_us, w = 1.0 / (t * t);
        sw += w;
        swy += w * (t - slope * fmax(s->v[j]->bytes_moved, fill));
    }
    double lat = swy / sw;
    for (size_t j = 0; j < s->n; j++) {
        double t = s->v[j]->t_med_us;
        ss += pow(t - slope * fmax(s->v[j]->bytes_moved, fill) - lat, 2) / (t * t);
    }
    of->coef[0] = lat;
    of->coef[1] = slope;
    of->se[0] = s->n > 1 ? sqrt(ss / (double)(s->n - 1) / sw) : 0;
    of->se[1] = 0;
}

/* The residuals, under `name`, of rows s against the line t = lat + max(work, fill)/(eff·hbm). */
static int resid_line(fit_t *f, const char *name, const sel_t *s, double (*work)(const kbrow_t *), double fill,
                      double lat, double eff, double hbm, err_t *e)
{
    double *t = malloc((s->n + 1) * sizeof *t), *pred = malloc((s->n + 1) * sizeof *pred);
    if (!t || !pred) {
        free(t), free(pred);
        return err_set(e, ERR_NOMEM, "fit: out of memory");
    }
    for (size_t j = 0; j < s->n; j++) {
        t[j] = s->v[j]->t_med_us;
        pred[j] = lat + fmax(work(s->v[j]), fill) / (eff * hbm * 1e3);
    }
    resid(f, name, pred, t, s->n);
    free(t), free(pred);
    return ERR_OK;
}

/* One kernel's own t = lat + max(work, fill)/(eff·hbm), WLS 1/t², over rows s (label names its
 * residuals; work(row) its bytes, get_bytes for a kernel reading HBM; fill 0 but for a scan whose
 * smallest grids fall short of the GPU, scan_fill). With ≥ 3 rows and a positive slope it writes nl
 * and ne where the catalogs declare them and returns their values in *lat and *eff; otherwise *lat
 * and *eff (the fallback) are kept. A kernel reading HBM (from_hbm) cannot beat kbench's measured
 * HBM ceiling: a fit above it (too few bytes to set the slope) holds eff there and refits the
 * latency. */
static int fit_own(fit_t *f, const sel_t *s, double (*work)(const kbrow_t *), double fill, double hbm, bool from_hbm,
                   const char *label, const char *nl, const char *ne, double *lat, double *eff, err_t *e)
{
    size_t n = s->n;
    char name[80];
    snprintf(name, sizeof name, "kernel_%s", label);
    lsq_fit_t of;
    err_t e2;
    if (n >= 3 && !line_floor(s, work, fill, name, &of, &e2) && of.coef[1] > 0) {
        double oe = 1e-3 / (of.coef[1] * hbm), oe_se = oe * of.se[1] / of.coef[1], lo, hi;
        double eff_max = f->hbm_ceiling_GBps > 0 ? f->hbm_ceiling_GBps / hbm : 1;
        if (from_hbm && oe > eff_max) {   /* faster than HBM allows: the bytes are too few to set the slope */
            note(f, "%s: mem_eff %.3g +- %.2g is above the measured HBM ceiling; held at %.3g (%.0f GB/s) and the "
                    "latency refitted", label, oe, oe_se, eff_max, eff_max * hbm);
            fixed_eff_fit(s, 1e-3 / (eff_max * hbm), fill, &of);
            oe = eff_max;
            oe_se = 0;
        }
        range_of(s, work, &lo, &hi);
        bool own = hwcat_param_unit(nl) && hwcat_param_unit(ne);
        if (own) {
            *lat = fmax(of.coef[0], 0);
            *eff = oe;
            const char *how = work != get_bytes ? "this kernel's own t = lat + query_bytes/(eff*hbm), WLS 1/t^2"
                              : fill > 0        ? "this kernel's own t = lat + max(bytes, fill)/(eff*hbm), WLS 1/t^2"
                                                : "this kernel's own t = lat + bytes/(eff*hbm), WLS 1/t^2";
            put(f, nl, *lat, of.se[0], lo, hi, s->v, n, how);
            put(f, ne, oe, oe_se, lo, hi, s->v, n, how);
        }
        note(f, "%s alone: latency %.3g +- %.2g us, mem_eff %.3g +- %.2g (%zu rows)%s", label, of.coef[0], of.se[0], oe,
             oe_se, n, own ? "" : "; the catalogs declare no parameters of its own, so the profile holds the pooled value");
    } else if (n) {
        note(f, "%s: not fitted alone (%zu rows without a positive slope in bytes); %s and %s from the pooled fit", label,
             n, nl, ne);
    }
    return resid_line(f, name, s, work, fill, *lat, *eff, hbm, e);
}

/* kbench's attention over winners still in L2 (layout "...;l2"): a kernel reading the L2, fitted apart. */
static bool l2_resident(const kbrow_t *r) { return strstr(r->layout, ";l2") != NULL; }

static double get_qheads(const kbrow_t *r) { return isnan(r->qheads) ? 1 : r->qheads; }

/* An HBM kernel's single-op row: alone, with bytes, its data in HBM, not reading winners left in L2. */
static bool hbm_kernel_row(const kbrow_t *r)
{
    return is_hbm_kernel(r->op) && alone(r) && r->bytes_moved > 0 && strcmp(r->placement, "host") && !l2_resident(r);
}

/* The scan family a kbench scan row measures: its variant's (the methods' names, models/cost.h), in
 * the form its layout or query heads name: "...;kernelN" → <family>_vN, a scan of several query
 * heads per KV head apart → <family>_qh where that form exists (HashAttention's usual scan is
 * per query head); -1 for a form kbench measured but the catalogs do not name. */
static int row_scan_family(const kbrow_t *r)
{
    int fam = cost_scan_family(r->variant);
    const char *k = strstr(r->layout, ";kernel");
    char form[16] = "";
    if (k) snprintf(form, sizeof form, "v%d", atoi(k + 7));
    else if (get_qheads(r) > 1 && cost_scan_form(fam, "qh") >= 0) snprintf(form, sizeof form, "qh");
    return cost_scan_form(fam, form);
}

/* A form's efficiency from its rows with its method's fixed time held (kbench measured each other
 * kernel at one size of the fit set): eff = mean of bytes/((t − lat)·hbm); its error carries the
 * fixed time's. */
static int fit_form(fit_t *f, const sel_t *s, double hbm, const char *base_lat, const char *label,
                    const char *nl, const char *ne, err_t *e)
{
    const fit_param_t *bp = fit_find(f, base_lat);
    if (!bp) {
        note(f, "%s: not fitted (%s not determined)", label, base_lat);
        return ERR_OK;
    }
    double lat = bp->value, sum = 0, sum_se = 0, lo, hi;
    for (size_t j = 0; j < s->n; j++) {
        double dt = s->v[j]->t_med_us - lat, eff = s->v[j]->bytes_moved / (dt * hbm * 1e3);
        if (!(dt > 0)) return note(f, "%s: not fitted (a row within %s)", label, base_lat), ERR_OK;
        sum += eff;
        sum_se += eff * bp->stderr_v / dt;
    }
    range_of(s, get_bytes, &lo, &hi);
    char how[160];
    snprintf(how, sizeof how, "this kernel's t = lat + bytes/(eff*hbm) with lat held at %s (%zu row%s)", base_lat,
             s->n, s->n > 1 ? "s" : "");
    put(f, nl, lat, bp->stderr_v, lo, hi, s->v, s->n, how);
    put(f, ne, sum / (double)s->n, sum_se / (double)s->n, lo, hi, s->v, s->n, how);
    char name[80];
    snprintf(name, sizeof name, "kernel_%s", label);
    return resid_line(f, name, s, get_bytes, 0, lat, sum / (double)s->n, hbm, e);
}

/* A scan family's fit over an index still in the L2 (kbench's "<layout>;l2" scan rows, models/cost.h):
 * t = lat + bytes/(eff·hbm), WLS 1/t², over three sizes or more. Where the rows do not determine the
 * efficiency (its standard error over SCAN_L2_EFF_SE of it: the L2 saves a fixed time on a scan its
 * unpacking binds, and three small sizes barely see the slope) it is held at the family's HBM value
 * and the fixed time alone fitted. Without such rows the family's HBM pair, so that such a run
 * predicts as before. Only the families the catalogs give L2 parameters. */
#define SCAN_L2_EFF_SE 0.10
static int fit_scan_l2(fit_t *f, const sel_t *rows, int fam, double hbm, double lat, double eff, err_t *e)
{
    char nl[64], ne[64], label[80], how[200];
    snprintf(nl, sizeof nl, "scan_%s_l2_latency_us", method_scan_family_name(fam));
    snprintf(ne, sizeof ne, "scan_%s_l2_mem_eff", method_scan_family_name(fam));
    snprintf(label, sizeof label, "kernel_scan_%s_l2", method_scan_family_name(fam));
    if (!hwcat_param_unit(nl) || !hwcat_param_unit(ne)) return ERR_OK;
    sel_t s = {0};
    for (size_t j = 0; j < rows->n; j++) {
        const kbrow_t *r = rows->v[j];
        if (r->op == OPKIND_SCAN && alone(r) && r->bytes_moved > 0 && strcmp(r->placement, "host") && l2_resident(r) &&
            row_scan_family(r) == fam && sel_add(&s, r))
            return free(s.v), err_set(e, ERR_NOMEM, "fit: out of memory");
    }
    lsq_fit_t of;
    err_t e2;
    if (s.n < 3 || line_of(&s, get_bytes, label, &of, &e2) || !(of.coef[1] > 0)) {
        snprintf(how, sizeof how, "derived: as scan_%s (%zu rows over an index in L2: not fitted)", method_scan_family_name(fam), s.n);
        put(f, nl, lat, 0, NAN, NAN, NULL, 0, how);
        put(f, ne, eff, 0, NAN, NAN, NULL, 0, how);
        free(s.v);
        return ERR_OK;
    }
    double le = 1e-3 / (of.coef[1] * hbm), le_se = le * of.se[1] / of.coef[1], lo, hi;
    bool held = le_se > SCAN_L2_EFF_SE * le;
    if (held) {
        note(f, "scan_%s_l2: mem_eff %.3g +- %.2g not determined by its rows; held at the family's %.3g and the "
                "latency fitted", method_scan_family_name(fam), le, le_se, eff);
        fixed_eff_fit(&s, 1e-3 / (eff * hbm), 0, &of);
        le = eff;
        le_se = 0;
    }
    range_of(&s, get_bytes, &lo, &hi);
    snprintf(how, sizeof how, "this kernel over an index in L2: t = lat + bytes/(eff*hbm), WLS 1/t^2%s",
             held ? ", eff held at the family's HBM value" : "");
    put(f, nl, fmax(of.coef[0], 0), of.se[0], lo, hi, s.v, s.n, how);
    put(f, ne, le, le_se, lo, hi, s.v, s.n, how);
    int rc = resid_line(f, label, &s, get_bytes, 0, fmax(of.coef[0], 0), le, hbm, e);
    free(s.v);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A scan whose grid falls short of the GPU takes about as long as the smallest that fills it:
 * t = lat + max(bytes, fill)/(eff·hbm). The fill is searched over the rows' sizes past the smallest
 * (two larger sizes left to set the line) and kept where it lowers the Bayesian information
 * criterion n·ln(χ²/n) + p·ln n of the line (p = 2) with the fill counted as a third parameter;
 * 0 otherwise (kbench's Fathom and SparQ scans of 4K and 16K tokens took the same time, 10-20% over
 * the line through their larger sizes, and the line's slope, bent to meet them, had put their 1M-4M
 * scans 7-9% fast). */
static int scan_fill(fit_t *f, const sel_t *s, const char *label, double *fill, err_t *e)
{
    *fill = 0;
    double *b = malloc((s->n + 1) * sizeof *b);
    if (!b) return err_set(e, ERR_NOMEM, "fit: out of memory");
    size_t m = 0;
    for (size_t i = 0; i < s->n; i++) b[i] = s->v[i]->bytes_moved;
    qsort(b, s->n, sizeof *b, cmp_double);
    for (size_t i = 0; i < s->n; i++)
        if (!m || b[i] > b[m - 1]) b[m++] = b[i];   /* the distinct sizes */
    lsq_fit_t lf;
    err_t e2;
    double n = (double)s->n, best = INFINITY, chi_line = NAN, chi_fill = NAN;
    if (m >= 3 && !line_of(s, get_bytes, label, &lf, &e2)) best = n * log(lf.chi2 / n) + 2 * log(n), chi_line = lf.chi2;
    for (size_t k = 1; k + 2 < m && isfinite(best); k++) {
        if (line_floor(s, get_bytes, b[k], label, &lf, &e2) || !(lf.coef[1] > 0)) continue;
        double bic = n * log(lf.chi2 / n) + 3 * log(n);
        if (bic < best) best = bic, *fill = b[k], chi_fill = lf.chi2;
    }
    if (*fill > 0)
        note(f, "%s: scans of up to %.4g MB take as long as one of %.4g MB (their grid short of the GPU): rms %.3g%% "
                "against the line's %.3g%% over %zu rows", label, *fill / 1e6, *fill / 1e6, 100 * sqrt(chi_fill / n),
             100 * sqrt(chi_line / n), s->n);
    free(b);
    return ERR_OK;
}

/* A scan family's fixed time per index bit of a token, scan_<family>_bit_ns where the catalogs
 * declare it (kbench's per-token scan: each block sums its query's channels, in proportion to the
 * bits, one after another before its tokens; 136 bits took ~0.45 us more than 68 at every n, on
 * the same bytes-per-second line): t = lat + bits·bit + bytes/(eff·hbm), WLS 1/t², over the
 * family's HBM scan rows where they hold two bit widths; else 0. *adj then holds copies of the
 * family's scan rows (from HBM and over an index in L2), in *copies (the caller frees both), with
 * bits·bit taken off their times, for the family's other fits to read; *adj stays empty where the
 * catalogs declare no such parameter. */
static int scan_bit_term(fit_t *f, const sel_t *rows, int fam, kbrow_t **copies, sel_t *adj, err_t *e)
{
    char nb[64];
    snprintf(nb, sizeof nb, "scan_%s_bit_ns", method_scan_family_name(fam));
    *copies = NULL;
    if (!hwcat_param_unit(nb)) return ERR_OK;
    sel_t hs = {0}, all = {0};
    double blo = INFINITY, bhi = -INFINITY;
    int rc = ERR_OK;
    for (size_t j = 0; j < rows->n && !rc; j++) {
        const kbrow_t *r = rows->v[j];
        if (r->op != OPKIND_SCAN || row_scan_family(r) != fam || !alone(r) || !strcmp(r->placement, "host")) continue;
        if (sel_add(&all, r) || (hbm_kernel_row(r) && sel_add(&hs, r))) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
        if (hbm_kernel_row(r)) blo = fmin(blo, r->bits), bhi = fmax(bhi, r->bits);
    }
    double bit_us = 0, se = 0;
    double *X = malloc((3 * hs.n + 1) * sizeof *X), *y = malloc((hs.n + 1) * sizeof *y), *w = malloc((hs.n + 1) * sizeof *w);
    if (!rc && (!X || !y || !w)) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    bool two = hs.n >= 4 && bhi > blo;
    if (!rc && two) {
        for (size_t i = 0; i < hs.n; i++) {
            const kbrow_t *r = hs.v[i];
            X[3 * i] = 1, X[3 * i + 1] = r->bits, X[3 * i + 2] = r->bytes_moved;
            y[i] = r->t_med_us, w[i] = 1 / (y[i] * y[i]);
        }
        lsq_fit_t lf;
        rc = lsq_wlinear(nb, X, y, w, hs.n, 3, &lf, e);
        if (!rc && lf.coef[1] > 0) bit_us = lf.coef[1], se = lf.se[1];
        else if (!rc) note(f, "%s: %.3g +- %.2g ns per bit, not above 0; held at 0", nb, 1e3 * lf.coef[1], 1e3 * lf.se[1]);
    }
    free(X), free(y), free(w);
    if (!rc) {
        put(f, nb, 1e3 * bit_us, 1e3 * se, blo, bhi, hs.v, hs.n,
            two ? "t = lat + bits*bit + bytes/(eff*hbm) over the family's HBM rows, WLS 1/t^2 (range: bits)"
                : "0: the family's rows hold one bit width");
        *copies = malloc((all.n + 1) * sizeof **copies);
        if (!*copies) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    }
    for (size_t i = 0; !rc && i < all.n; i++) {
        (*copies)[i] = *all.v[i];
        (*copies)[i].t_med_us -= all.v[i]->bits * bit_us;
        if (sel_add(adj, &(*copies)[i])) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    }
    free(hs.v), free(all.v);
    return rc;
}

/* The rows' distinct byte counts. */
static size_t distinct_sizes(const sel_t *s)
{
    size_t m = 0;
    for (size_t i = 0; i < s->n; i++) {
        size_t j = 0;
        while (j < i && s->v[j]->bytes_moved != s->v[i]->bytes_moved) j++;
        m += j == i;
    }
    return m;
}

/* Each scan family's own fit (models/cost.h), over the HBM scan rows of `rows` (row_scan_family):
 * a method's with three sizes or more its own fixed time and efficiency, and so another form of a
 * method's scan (a kernel of its own, whose fixed time is not the method's: Fathom's kernel 1 took
 * 10.5 us over 16K-256K where the main one takes 5.7); a form at fewer sizes its efficiency with the
 * method's fixed time (fit_form). Families without rows keep the scan kind's values (scan_lat,
 * scan_eff) through the cost forms' fallback. */
static int fit_scan_families(fit_t *f, const sel_t *rows, double hbm, double scan_lat, double scan_eff, err_t *e)
{
    int rc = ERR_OK;
    for (int fam = 0; fam < method_scan_family_count() && !rc; fam++) {
        sel_t fs = {0}, adj = {0};
        kbrow_t *copies = NULL;
        rc = scan_bit_term(f, rows, fam, &copies, &adj, e);
        const sel_t *frows = copies ? &adj : rows;
        for (size_t j = 0; j < frows->n && !rc; j++)
            if (frows->v[j]->op == OPKIND_SCAN && hbm_kernel_row(frows->v[j]) && row_scan_family(frows->v[j]) == fam &&
                sel_add(&fs, frows->v[j]))
                rc = err_set(e, ERR_NOMEM, "fit: out of memory");
        char nl[64], ne[64], label[64], base[64];
        snprintf(nl, sizeof nl, "scan_%s_latency_us", method_scan_family_name(fam));
        snprintf(ne, sizeof ne, "scan_%s_mem_eff", method_scan_family_name(fam));
        snprintf(label, sizeof label, "scan_%s", method_scan_family_name(fam));
        snprintf(base, sizeof base, "scan_%.*s_latency_us", (int)strcspn(method_scan_family_name(fam), "_"), method_scan_family_name(fam));
        double l = scan_lat, ef = scan_eff;
        bool form = strcmp(base, nl) != 0;
        if (!rc && fs.n && form && distinct_sizes(&fs) < 3) rc = fit_form(f, &fs, hbm, base, label, nl, ne, e);
        else if (!rc && fs.n && form) rc = fit_own(f, &fs, get_bytes, 0, hbm, true, label, nl, ne, &l, &ef, e);
        else if (!rc && fs.n) {
            double fill = 0, lo, hi;
            char nf[64];
            snprintf(nf, sizeof nf, "scan_%s_fill_bytes", method_scan_family_name(fam));
            if (hwcat_param_unit(nf)) rc = scan_fill(f, &fs, label, &fill, e);
            if (!rc) rc = fit_own(f, &fs, get_bytes, fill, hbm, true, label, nl, ne, &l, &ef, e);
            range_of(&fs, get_bytes, &lo, &hi);
            if (!rc && hwcat_param_unit(nf) && fs.n >= 3)
                put(f, nf, fill, 0, lo, hi, fs.v, fs.n,
                    fill > 0 ? "the size of the rows' at which t = lat + max(bytes, fill)/(eff*hbm) has the least BIC"
                             : "0: no fill at the rows' sizes lowers the line's BIC");
        }
        if (!rc && !form) rc = fit_scan_l2(f, frows, fam, hbm, l, ef, e);
        free(fs.v), free(adj.v), free(copies);
    }
    return rc;
}

/* The bytes the query heads read: a K/V head's row once per query head attending it (the plans'
 * work for attention over winners in L2, models/provider.c). */
static double get_query_bytes(const kbrow_t *r) { return r->bytes_moved * get_qheads(r); }

/* kbench's attention over winners rewritten in L2 ("...;l2") whose winners the L2 can hold: past
 * l2_bytes (the per-query-head rows at k = 4096, 64 MiB) they are read from HBM however written. */
static bool attn_in_l2(const kbrow_t *r, double l2_bytes) { return l2_resident(r) && r->bytes_moved <= l2_bytes; }

/* Attention over winners still in L2: its own t = lat + query_bytes/(eff·hbm). */
static int fit_attn_l2(fit_t *f, const sel_t *rows, const calib_t *seed, double hbm, err_t *e)
{
    double l2_bytes;
    int rc = value_of(f, seed, "l2_bytes", &l2_bytes, e);
    if (rc) return rc;
    sel_t s = {0};
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (is_op(r, OPKIND_ATTN_SPARSE) && !qh_attn(r) && alone(r) && r->bytes_moved > 0 && attn_in_l2(r, l2_bytes) &&
            sel_add(&s, r))
            return free(s.v), err_set(e, ERR_NOMEM, "fit: out of memory");
    }
    if (!s.n) note(f, "attn_sparse_l2_latency_us, attn_sparse_l2_mem_eff: not determined (no L2-resident attention rows)");
    double lat, eff;
    if (s.n) rc = value_of(f, seed, "attn_sparse_latency_us", &lat, e);
    if (s.n && !rc) rc = value_of(f, seed, "attn_sparse_mem_eff", &eff, e);
    if (s.n && !rc) rc = fit_own(f, &s, get_query_bytes, 0, hbm, false, "attn_sparse_l2", "attn_sparse_l2_latency_us", "attn_sparse_l2_mem_eff", &lat, &eff, e);
    free(s.v);
    return rc;
}

/* Attention over each query head's own winners (qh_attn rows): its own t = lat + bytes/(eff·hbm)
 * from HBM and over winners still in L2 (its bytes are its query bytes: g = 1); L2 rows past the L2
 * are left out of both. Where the fit set has no such rows (kbench before e6617d4), or too few sizes,
 * the GQA kernel's values stand for it, as the plans priced it before: a query head's row at what a
 * group's costs per query. */
static int fit_attn_qh(fit_t *f, const sel_t *rows, const calib_t *seed, double hbm, err_t *e)
{
    double l2_bytes;
    int rc = value_of(f, seed, "l2_bytes", &l2_bytes, e);
    static const char *const own[2][3] = {
        {"attn_sparse_qh", "attn_sparse_qh_latency_us", "attn_sparse_qh_mem_eff"},
        {"attn_sparse_qh_l2", "attn_sparse_qh_l2_latency_us", "attn_sparse_qh_l2_mem_eff"}};
    static const char *const kv[2][2] = {{"attn_sparse_latency_us", "attn_sparse_mem_eff"},
                                         {"attn_sparse_l2_latency_us", "attn_sparse_l2_mem_eff"}};
    for (int l2 = 0; l2 < 2 && !rc; l2++) {
        sel_t s = {0};
        for (size_t i = 0; i < rows->n && !rc; i++) {
            const kbrow_t *r = rows->v[i];
            bool in = l2 ? attn_in_l2(r, l2_bytes) : !l2_resident(r);
            if (qh_attn(r) && alone(r) && r->bytes_moved > 0 && in && sel_add(&s, r))
                rc = err_set(e, ERR_NOMEM, "fit: out of memory");
        }
        double lat, eff;
        if (!rc) rc = value_of(f, seed, kv[l2][0], &lat, e);
        if (!rc) rc = value_of(f, seed, kv[l2][1], &eff, e);
        if (!rc && s.n) rc = fit_own(f, &s, get_bytes, 0, hbm, l2 == 0, own[l2][0], own[l2][1], own[l2][2], &lat, &eff, e);
        if (!rc && !fit_find(f, own[l2][1])) {
            char how[120];
            snprintf(how, sizeof how, "derived: as %s and %s (%zu per-query-head rows in the fit set)", kv[l2][0],
                     kv[l2][1], s.n);
            put(f, own[l2][1], lat, 0, NAN, NAN, NULL, 0, how);
            put(f, own[l2][2], eff, 0, NAN, NAN, NULL, 0, how);
        }
        free(s.v);
    }
    return rc;
}

/* The split-K combine: t = lat + splits·per_split (kbench's `pieces` column holds the partials per
 * head), WLS 1/t², over its cold rows (attn_combine_*) or its rows reading partials still in L2
 * (attn_combine_l2_*). Where the partial kernel before the combine streamed more K/V than the L2
 * holds (region_bytes > l2_bytes), kbench's "l2" partials were evicted: those rows are left out. */
static int fit_combine(fit_t *f, const sel_t *rows, const calib_t *seed, bool l2, err_t *e)
{
    const char *pre = l2 ? "attn_combine_l2" : "attn_combine";
    double l2_bytes;
    int rc = value_of(f, seed, "l2_bytes", &l2_bytes, e);
    if (rc) return rc;
    sel_t s = {0};
    size_t evicted = 0;
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (!is_op(r, OPKIND_ATTN_COMBINE) || !alone(r) || !(r->pieces > 0) || l2_resident(r) != l2) continue;
        if (l2 && r->region_bytes > l2_bytes) {
            evicted++;
            continue;
        }
        if (sel_add(&s, r)) return free(s.v), err_set(e, ERR_NOMEM, "fit: out of memory");
    }
    if (evicted)
        note(f, "%s: %zu rows left out (the partial kernel before them streamed more K/V than the %.0f MiB L2)", pre,
             evicted, l2_bytes / 1048576.0);
    double *t = malloc((s.n + 1) * sizeof *t), *pred = malloc((s.n + 1) * sizeof *pred);
    rc = (!t || !pred) ? err_set(e, ERR_NOMEM, "fit: out of memory") : ERR_OK;
    for (size_t i = 0; !rc && i < s.n; i++) t[i] = s.v[i]->t_med_us;
    lsq_fit_t cf;
    err_t e2;
    char nl[64], ns[64], how[160];
    snprintf(nl, sizeof nl, "%s_latency_us", pre);
    snprintf(ns, sizeof ns, "%s_split_ns", pre);
    snprintf(how, sizeof how, "%s: t = lat + splits*per_split, WLS 1/t^2 (splits: the pieces column)", pre);
    if (!rc && s.n >= 3 && !line_of(&s, get_pieces, how, &cf, &e2) && cf.coef[1] >= 0) {
        double lo, hi;
        range_of(&s, get_pieces, &lo, &hi);
        put(f, nl, fmax(cf.coef[0], 0), cf.se[0], lo, hi, s.v, s.n, how);
        put(f, ns, cf.coef[1] * 1e3, cf.se[1] * 1e3, lo, hi, s.v, s.n, how);
        for (size_t i = 0; i < s.n; i++) pred[i] = fmax(cf.coef[0], 0) + cf.coef[1] * s.v[i]->pieces;
        char group[64];
        snprintf(group, sizeof group, "kernel_%s", pre);
        resid(f, group, pred, t, s.n);
    } else if (!rc) {
        note(f, "%s, %s: not determined (%zu combine rows)", nl, ns, s.n);
    }
    free(t), free(pred), free(s.v);
    return rc;
}

/* Dense attention's split-K blocks per SM at a row's size (cost_attn_splits, cost_attn_dense_blocks). */
static double attn_blocks_per_sm(const kbrow_t *r, const cost_t *c)
{
    double heads = r->heads > 0 ? r->heads : 1;
    return heads * cost_attn_splits(c, r->n_tokens, heads) / c->sm_count;
}

/* Dense attention's own t = lat + (blocks/SMs)*block + bytes/(eff*hbm), WLS 1/t^2: each SM runs its
 * share of the split-K grid's blocks in turn, so the fixed time grows with the blocks until the grid
 * fills the GPU (kbench: 512 blocks at 4K, 2048-2112 from 16K). Three parameters on the fit set's
 * sizes; falls back to fit_own's two without three sizes or a positive block time. */
static int fit_attn_dense(fit_t *f, const sel_t *s, const calib_t *seed, double hbm, double *lat, double *eff, err_t *e)
{
    cost_t c;   /* the split rule's three parameters, as the cost forms read them */
    memset(&c, 0, sizeof c);
    int rc = calib_get(seed, "attn_split_blocks_per_sm", &c.split_blocks_per_sm, e);
    if (!rc) rc = calib_get(seed, "attn_split_min_rows", &c.split_min_rows, e);
    if (!rc) rc = calib_get(seed, "sm_count", &c.sm_count, e);
    size_t n = s->n;
    double *X = malloc((3 * n + 1) * sizeof *X), *y = malloc((n + 1) * sizeof *y), *w = malloc((n + 1) * sizeof *w);
    double *pred = malloc((n + 1) * sizeof *pred);
    if (!rc && (!X || !y || !w || !pred)) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    lsq_fit_t lf;
    bool ok = false;
    if (!rc && n >= 4) {
        for (size_t j = 0; j < n; j++) {
            X[3 * j] = 1;
            X[3 * j + 1] = attn_blocks_per_sm(s->v[j], &c);
            X[3 * j + 2] = s->v[j]->bytes_moved;
            y[j] = s->v[j]->t_med_us;
            w[j] = 1 / (y[j] * y[j]);
        }
        err_t e2;
        ok = !lsq_wlinear("attn_dense t = lat + blocks/SM*block + bytes/(eff*hbm)", X, y, w, n, 3, &lf, &e2) &&
             lf.coef[1] > 0 && lf.coef[2] > 0;
    }
    if (!rc && !ok) {
        rc = fit_own(f, s, get_bytes, 0, hbm, true, "attn_dense", "attn_dense_latency_us", "attn_dense_mem_eff", lat, eff, e);
        note(f, "attn_dense_block_us: not determined (%zu rows; 4 sizes needed with a positive block time)", n);
    } else if (!rc) {
        double lo, hi, blo = INFINITY, bhi = 0, oe = 1e-3 / (lf.coef[2] * hbm);
        range_of(s, get_bytes, &lo, &hi);
        for (size_t j = 0; j < n; j++) blo = fmin(blo, X[3 * j + 1]), bhi = fmax(bhi, X[3 * j + 1]);
        const char *how = "dense attention t = lat + (blocks/SMs)*block + bytes/(eff*hbm), WLS 1/t^2";
        *lat = fmax(lf.coef[0], 0);
        *eff = oe;
        put(f, "attn_dense_latency_us", *lat, lf.se[0], lo, hi, s->v, n, how);
        put(f, "attn_dense_block_us", lf.coef[1], lf.se[1], blo, bhi, s->v, n, how);
        put(f, "attn_dense_mem_eff", oe, oe * lf.se[2] / lf.coef[2], lo, hi, s->v, n, how);
        for (size_t j = 0; j < n; j++) pred[j] = *lat + X[3 * j + 1] * lf.coef[1] + X[3 * j + 2] * lf.coef[2];
        resid(f, "kernel_attn_dense", pred, y, n);
    }
    free(X), free(y), free(w), free(pred);
    return rc;
}

static int fit_kernels(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
{
    double hbm;
    int rc = calib_get(seed, "hbm_GBps", &hbm, e);
    if (rc) return rc;
    /* s: every HBM kernel's rows (each kind's own fit); line: those of the pooled form, without dense
     * attention, whose fixed time grows with its split-K grid (fit_attn_dense) */
    sel_t s = {0}, line = {0};
    for (size_t i = 0; i < rows->n && !rc; i++) {
        const kbrow_t *r = rows->v[i];
        if (hbm_kernel_row(r) && !other_kernel(r) && !qh_attn(r))
            rc = sel_add(&s, r) || (r->op != OPKIND_ATTN_DENSE && r->op != OPKIND_WINNER_FETCH && sel_add(&line, r));
    }
    if (rc) return free(s.v), free(line.v), err_set(e, ERR_NOMEM, "fit: out of memory");
    if (line.n < 3) {
        note(f, "kernel_latency_us, kernel_mem_eff: not determined (%zu HBM kernel rows)", line.n);
        free(s.v), free(line.v);
        return ERR_OK;
    }
    lsq_fit_t lf;
    if (!rc) {
        rc = line_of(&line, get_bytes, "kernels t = lat + bytes/(eff*hbm)", &lf, e);
    }
    if (!rc && !(lf.coef[1] > 0))
        rc = err_set(e, ERR_CONVERGE, "fit kernels: did not converge (non-positive time per byte)");
    if (!rc) {
        double lat = lf.coef[0], eff = 1e-3 / (lf.coef[1] * hbm);
        double lo, hi;
        range_of(&line, get_bytes, &lo, &hi);
        char how[200];
        snprintf(how, sizeof how, "HBM kernels (scan, quantize, wf_plan, attn_* but dense) t = lat + bytes/(eff*%.0f GB/s), WLS 1/t^2", hbm);
        if (lat < 0) {
            note(f, "kernel_latency_us: the fit gave %.3g us (< 0); written as 0", lat);
            lat = 0;
        }
        put(f, "kernel_latency_us", lat, lf.se[0], lo, hi, line.v, line.n, how);
        put(f, "kernel_mem_eff", eff, eff * lf.se[1] / lf.coef[1], lo, hi, line.v, line.n, how);
        note(f, "kernel_compute_eff: not determined (kbench kernel rows carry no FLOP counts for attention)");
        /* Each op's own fit where it has enough sizes (written where the catalogs declare
         * <op>_latency_us and <op>_mem_eff), each scan family's within the scans, and residuals
         * under the values the profile gives them. */
        for (size_t i = 0; i < s.n && !rc; i++) {
            int op = s.v[i]->op;
            bool first = true;
            for (size_t j = 0; j < i && first; j++) first = s.v[j]->op != op;
            if (!first) continue;
            sel_t os = {0};
            for (size_t j = 0; j < s.n && !rc; j++)
                if (s.v[j]->op == op && sel_add(&os, s.v[j])) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
            char nl[64], ne[64];
            snprintf(nl, sizeof nl, "%s_latency_us", opkind_name(op));
            snprintf(ne, sizeof ne, "%s_mem_eff", opkind_name(op));
            double op_lat = lat, op_eff = eff;
            if (!rc && op == OPKIND_ATTN_DENSE) rc = fit_attn_dense(f, &os, seed, hbm, &op_lat, &op_eff, e);
            else if (!rc) rc = fit_own(f, &os, get_bytes, 0, hbm, true, opkind_name(op), nl, ne, &op_lat, &op_eff, e);
            if (!rc && op == OPKIND_SCAN) rc = fit_scan_families(f, rows, hbm, op_lat, op_eff, e);
            free(os.v);
        }
        for (int op = 0; op < OPKIND_COUNT; op++) pooled_where_no_rows(f, rows, op, lat, eff);
    }
    free(s.v);
    free(line.v);
    if (!rc) rc = fit_attn_l2(f, rows, seed, hbm, e);
    if (!rc) rc = fit_attn_qh(f, rows, seed, hbm, e);
    if (!rc) rc = fit_combine(f, rows, seed, false, e);
    if (!rc) rc = fit_combine(f, rows, seed, true, e);
    if (rc) return rc;

    return fit_topk(f, rows, seed, e);
}

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
static int fit_l2_writeback(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
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

static int fit_gemm(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
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

/* ---- host-side overheads --------------------------------------------------------------------- */

/* The median's standard error from a row's spread: sigma ~ (p90 - p10)/2.563 (a normal's), the
 * median's 1.2533·sigma/sqrt(reps). */
static double median_se(const kbrow_t *r)
{
    return 1.2533 * (r->t_p90_us - r->t_p10_us) / 2.563 / sqrt(fmax(r->reps, 1));
}

/* The copy engine's hand-off to the SMs: an empty kernel timed from an event after a copy in its
 * stream, less the same kernel after a kernel (kbench's launch rows after_copy, after_kernel). It is
 * uniform, not centred: the completion is seen at a periodic check whose phase varies, so the
 * rows' medians wander (2.5-6.3 us over 16 runs) while p10 and p90 stay (3.4-3.8, 10.1-10.9 us).
 * A uniform over [a, b] has them at a + 0.1·w and a + 0.9·w (w = b − a): its midpoint is theirs and
 * its width (p90 − p10)/0.8; each quantile's standard error sqrt(0.09/reps)·w (a uniform's density
 * 1/w). */
static void fit_handoff(fit_t *f, const sel_t *rows)
{
    const kbrow_t *after[2] = {NULL, NULL};   /* after a kernel, after a copy */
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (!is_op(r, OPKIND_LAUNCH)) continue;
        if (!strcmp(r->variant, "after_kernel")) after[0] = r;
        if (!strcmp(r->variant, "after_copy")) after[1] = r;
    }
    if (!after[0] || !after[1]) {
        note(f, "ce_handoff_us: not determined (no launch rows after_copy and after_kernel)");
        return;
    }
    const kbrow_t *k = after[0], *c = after[1];
    double w = (c->t_p90_us - c->t_p10_us) / 0.8, mid = (c->t_p10_us + c->t_p90_us) / 2 - k->t_med_us;
    double se_q = sqrt(0.09 / fmax(c->reps, 1)) * w;   /* each of p10, p90 */
    put(f, "ce_handoff_us", fmax(mid, 0), sqrt(se_q * se_q / 2 + pow(median_se(k), 2)), NAN, NAN, after, 2,
        "an empty kernel after a copy less after a kernel (launch rows after_copy, after_kernel): the midpoint of the "
        "former's p10 and p90 less the latter's median");
    put(f, "ce_handoff_spread_us", fmax(w, 0), sqrt(2.0) * se_q / 0.8, NAN, NAN, &c, 1,
        "an empty kernel after a copy (launch row after_copy): (p90 - p10)/0.8, a uniform's width");
}

/* What an event between two kernels costs a chain of them: kbench's launch rows chain and
 * chain_events (the same kernels back to back, and with an event after each), their medians'
 * difference over the chain's length. */
static void fit_event(fit_t *f, const sel_t *rows)
{
    const kbrow_t *ch[2] = {NULL, NULL};   /* without, with events */
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (!is_op(r, OPKIND_LAUNCH) || !(r->pieces >= 1)) continue;
        if (!strcmp(r->variant, "chain")) ch[0] = r;
        if (!strcmp(r->variant, "chain_events")) ch[1] = r;
    }
    if (!ch[0] || !ch[1] || ch[0]->pieces != ch[1]->pieces) {
        note(f, "event_us: not determined (no launch rows chain and chain_events of one length)");
        return;
    }
    double n = ch[0]->pieces, v = (ch[1]->t_med_us - ch[0]->t_med_us) / n;
    put(f, "event_us", fmax(v, 0), hypot(median_se(ch[0]), median_se(ch[1])) / n, NAN, NAN, ch, 2,
        "a chain of kernels with an event after each less without, over its length (launch rows chain_events, "
        "chain: medians)");
}

/* Host time per item of `kind` rows (t_med / pieces); rows of `variant` only when there are any
 * (kbench's launch rows: host_enqueue is the host's cost, empty_b2b the GPU's). */
static int fit_overhead(fit_t *f, const sel_t *rows, int kind, const char *variant, const char *name, err_t *e)
{
    sel_t s = {0};
    int rc = ERR_OK;
    bool have_variant = false;
    for (size_t i = 0; i < rows->n && variant; i++)
        have_variant |= is_op(rows->v[i], kind) && !strcmp(rows->v[i]->variant, variant);
    for (size_t i = 0; i < rows->n && !rc; i++)
        if (is_op(rows->v[i], kind) && alone(rows->v[i]) && (!have_variant || !strcmp(rows->v[i]->variant, variant)))
            rc = sel_add(&s, rows->v[i]);
    if (rc) return err_set(e, ERR_NOMEM, "fit: out of memory");
    if (!s.n) {
        note(f, "%s: not determined (no %s rows)", name, opkind_name(kind));
        return ERR_OK;
    }
    double *v = malloc(s.n * sizeof *v), *p = malloc(s.n * sizeof *p);
    if (!v || !p) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    for (size_t i = 0; !rc && i < s.n; i++)
        v[i] = s.v[i]->pieces >= 1 ? s.v[i]->t_med_us / s.v[i]->pieces : s.v[i]->t_med_us;
    double m = 0, se = 0;
    if (!rc) rc = lsq_mean(name, v, s.n, &m, &se, e);
    if (!rc) {
        char how[160];
        snprintf(how, sizeof how, "time per item (t_med / pieces), mean%s%s", have_variant ? " of variant " : "",
                 have_variant ? variant : "");
        put(f, name, m, se, 1, 0, s.v, s.n, how);
        for (size_t i = 0; i < s.n; i++) p[i] = m;
        resid(f, name, p, v, s.n);
    }
    free(v);
    free(p);
    free(s.v);
    return rc;
}

static double get_med(const kbrow_t *r) { return r->t_med_us; }

/* Which jitter a fit-set row's spread measures: the GPU's alone, or, for a row moving host bytes
 * over the link (the link suite's transfers, the kernels suite's rows placed on the host), the copy
 * engine's (copies, and fetches by it) or the gathers' (kernels whose SMs read host memory: gathers,
 * SM fetches, zero-copy kernels), as the engine tells them apart (sim/exec.c op_jitter). */
typedef enum { JIT_GPU, JIT_COPY, JIT_GATHER, JIT_CLASSES } jit_class_t;

static jit_class_t jitter_class(const kbrow_t *r)
{
    if (strcmp(r->suite, "link") && strcmp(r->placement, "host")) return JIT_GPU;
    bool ce = is_op(r, OPKIND_H2D_COPY) || is_op(r, OPKIND_D2H_COPY) || is_op(r, OPKIND_H2D_COPY2D) || is_op(r, OPKIND_FLUSH) ||
              is_op(r, OPKIND_H2D_BATCH) || (is_op(r, OPKIND_INDEX_FETCH) && !strncmp(r->variant, "ce", 2));
    return ce ? JIT_COPY : JIT_GATHER;
}

/* How much a measured time varies (run.jitter): over the timed single ops of the fit set (the time
 * slice's and host-timed launch rows aside), p99 − median ≈ jitter + rel·median, robust (bisquare)
 * relative to the median, as a p99 is judged (an error in the spread counts as its share of the op's
 * time; relative to the spread itself, the rows with the smallest spreads weighed most and the fit
 * came out low: the fit set's own p99s 1.4% (GPU) and 2.6% (host) short on average, against +0.4
 * and −0.6% so); once per class (jitter_class: the gathers' tails, 5-20 us on 30-100 us, are not
 * the copies' 0.5-3 us, and one fit over both, robust, had followed the copies). */
static int fit_jitter_of(fit_t *f, const sel_t *rows, jit_class_t cls, err_t *e)
{
    static const char *const abs_names[JIT_CLASSES] = {"jitter_us", "jitter_copy_us", "jitter_gather_us"};
    static const char *const rel_names[JIT_CLASSES] = {"jitter_rel", "jitter_copy_rel", "jitter_gather_rel"};
    static const char *const which[JIT_CLASSES] = {"the fit set's single ops on the GPU alone",
                                                   "the fit set's single copy-engine transfers over the host link",
                                                   "the fit set's single ops whose SMs read host memory"};
    static const char *const resid_names[JIT_CLASSES] = {"p99", "p99_copy", "p99_gather"};
    const char *abs_name = abs_names[cls], *rel_name = rel_names[cls];
    sel_t s = {0};
    int rc = ERR_OK;
    for (size_t i = 0; i < rows->n && !rc; i++) {
        const kbrow_t *r = rows->v[i];
        if (alone(r) && !is_op(r, OPKIND_TIMESLICE) && !is_op(r, OPKIND_LAUNCH) && r->t_med_us > 0 &&
            r->t_p99_us > r->t_med_us && jitter_class(r) == cls)
            rc = sel_add(&s, r);
    }
    double *x = malloc((s.n + 1) * sizeof *x), *y = malloc((s.n + 1) * sizeof *y), *pred = malloc((s.n + 1) * sizeof *pred);
    double *X = malloc((2 * s.n + 1) * sizeof *X), *one = malloc((s.n + 1) * sizeof *one);
    if (rc || !x || !y || !pred || !X || !one) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    lsq_fit_t lf;
    for (size_t i = 0; !rc && i < s.n; i++) {
        x[i] = s.v[i]->t_med_us;
        y[i] = s.v[i]->t_p99_us - s.v[i]->t_med_us;
        X[2 * i] = 1 / x[i];         /* relative to the median: spread/median = jitter/median + rel */
        X[2 * i + 1] = 1;
        one[i] = y[i] / x[i];
    }
    if (!rc && s.n < 3) note(f, "%s, %s: not determined (%zu rows with a spread)", abs_name, rel_name, s.n);
    /* a p99 of 30 repetitions is their maximum (kbench takes 300 of short ops since 38fcb9a): robust
     * against the rows a stray delay hit */
    if (!rc && s.n >= 3) rc = lsq_robust("p99 - median = jitter + rel*median", X, one, s.n, 2, &lf, e);
    if (!rc && s.n >= 3) {
        double lo, hi;
        range_of(&s, get_med, &lo, &hi);
        char how[240];
        snprintf(how, sizeof how, "p99 - median = jitter + rel*median over %s, robust (bisquare) relative to the median (the intercept)",
                 which[cls]);
        put(f, abs_name, lf.coef[0] > 0 ? lf.coef[0] : 0, lf.se[0], lo, hi, s.v, s.n, how);
        snprintf(how, sizeof how, "p99 - median = jitter + rel*median over %s, robust (bisquare) relative to the median (the slope)",
                 which[cls]);
        put(f, rel_name, lf.coef[1] > 0 ? lf.coef[1] : 0, lf.se[1], lo, hi, s.v, s.n, how);
        for (size_t i = 0; i < s.n; i++) {   /* the p99s themselves, as they are judged */
            pred[i] = x[i] + lf.coef[0] + lf.coef[1] * x[i];
            y[i] = s.v[i]->t_p99_us;
        }
        resid(f, resid_names[cls], pred, y, s.n);
    }
    free(x);
    free(y);
    free(X);
    free(one);
    free(pred);
    free(s.v);
    return rc;
}

static int fit_jitter(fit_t *f, const sel_t *rows, err_t *e)
{
    int rc = ERR_OK;
    for (int c = 0; c < JIT_CLASSES && !rc; c++) rc = fit_jitter_of(f, rows, (jit_class_t)c, e);
    return rc;
}

static double get_procs(const kbrow_t *r) { return r->procs; }

/* Time slicing between separate contexts (op timeslice, N = procs): a context's runs between
 * switch-outs are the slice T, its switch-outs with N contexts last gap = (N-1)·T + N·c. T: the
 * mean of the run rows' medians; c: the mean over the gap rows of (gap - (N-1)·T)/N; standard
 * errors from their spread (n - 1). The whole GPU spinning (variants run_full, gap_full) saves and
 * restores every resident block as a decode kernel does: its rows are used where present, the one
 * thread's (run, gap) otherwise. */
static int fit_timeslice(fit_t *f, const sel_t *rows, err_t *e)
{
    sel_t run = {0}, gap = {0};
    int rc = ERR_OK;
    bool full = false;
    for (size_t i = 0; i < rows->n; i++)
        full |= is_op(rows->v[i], OPKIND_TIMESLICE) && !strcmp(rows->v[i]->variant, "gap_full");
    for (size_t i = 0; i < rows->n && !rc; i++) {
        const kbrow_t *r = rows->v[i];
        if (!is_op(r, OPKIND_TIMESLICE) || !(r->procs >= 2) || !(r->t_med_us > 0)) continue;
        if (!strcmp(r->variant, full ? "run_full" : "run")) rc = sel_add(&run, r);
        else if (!strcmp(r->variant, full ? "gap_full" : "gap")) rc = sel_add(&gap, r);
        else if (full && !strcmp(r->variant, "gap"))
            note(f, "ctx_switch_us: one spinning thread's switch-outs: %.4g us with %g contexts (the profile's is the whole GPU's)",
                 r->t_med_us, r->procs);
    }
    if (rc) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    if (!rc && (!run.n || !gap.n))
        note(f, "timeslice_us, ctx_switch_us: not determined (no timeslice run and gap rows)");
    if (!rc && run.n && gap.n) {
        double T = 0, se_T = 0, c = 0, se_c = 0, lo, hi;
        double *v = malloc((run.n + gap.n) * sizeof *v), *pred = malloc(gap.n * sizeof *pred);
        double *meas = malloc(gap.n * sizeof *meas);
        if (!v || !pred || !meas) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
        for (size_t i = 0; !rc && i < run.n; i++) v[i] = run.v[i]->t_med_us;
        if (!rc) rc = lsq_mean("time slice", v, run.n, &T, &se_T, e);
        for (size_t i = 0; !rc && i < gap.n; i++) {
            double N = gap.v[i]->procs;
            meas[i] = gap.v[i]->t_med_us;
            v[i] = (meas[i] - (N - 1) * T) / N;
        }
        if (!rc) rc = lsq_mean("context switch", v, gap.n, &c, &se_c, e);
        for (size_t i = 0; !rc && i < gap.n; i++) pred[i] = (gap.v[i]->procs - 1) * T + gap.v[i]->procs * c;
        range_of(&run, get_procs, &lo, &hi);
        if (!rc) {
            put(f, "timeslice_us", T, se_T, lo, hi, run.v, run.n,
                full ? "time-sliced contexts, the whole GPU spinning: a context's median run between switch-outs, mean over the process counts"
                     : "time-sliced contexts, one thread spinning: a context's median run between switch-outs, mean over the process counts");
            put(f, "ctx_switch_us", c > 0 ? c : 0, se_c, lo, hi, gap.v, gap.n,
                full ? "time-sliced contexts, the whole GPU spinning: switch-out gap = (N-1)*slice + N*switch, mean over the process counts"
                     : "time-sliced contexts, one thread spinning: switch-out gap = (N-1)*slice + N*switch, mean over the process counts");
            resid(f, "timeslice_gap", pred, meas, gap.n);
        }
        free(v);
        free(pred);
        free(meas);
    }
    free(run.v);
    free(gap.v);
    return rc;
}

/* Graph replays by node count: t = launch + nodes·per_node; the launch is graph_launch_us. */
static int fit_graph(fit_t *f, const sel_t *rows, err_t *e)
{
    sel_t s = {0};
    int rc = ERR_OK;
    for (size_t i = 0; i < rows->n && !rc; i++)
        if (is_op(rows->v[i], OPKIND_GRAPH_REPLAY) && alone(rows->v[i])) rc = sel_add(&s, rows->v[i]);
    if (rc) return err_set(e, ERR_NOMEM, "fit: out of memory");
    double lo, hi;
    range_of(&s, get_pieces, &lo, &hi);
    if (s.n < 2 || !(hi > lo)) {
        free(s.v);
        return fit_overhead(f, rows, OPKIND_GRAPH_REPLAY, NULL, "graph_launch_us", e);
    }
    double *X = malloc(2 * s.n * sizeof *X), *y = malloc(s.n * sizeof *y), *w = malloc(s.n * sizeof *w);
    double *pred = malloc(s.n * sizeof *pred);
    if (!X || !y || !w || !pred) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    lsq_fit_t lf;
    for (size_t i = 0; !rc && i < s.n; i++) {
        X[2 * i] = 1;
        X[2 * i + 1] = s.v[i]->pieces > 0 ? s.v[i]->pieces : 1;
        y[i] = s.v[i]->t_med_us;
        w[i] = 1.0 / (y[i] * y[i]);
    }
    if (!rc) rc = lsq_wlinear("graph replay t = launch + nodes*node", X, y, w, s.n, 2, &lf, e);
    if (!rc) {
        double v = lf.coef[0] > 0 ? lf.coef[0] : 0;
        put(f, "graph_launch_us", v, lf.se[0], lo, hi, s.v, s.n,
            "graph replay t = launch + nodes*per_node, WLS 1/t^2 (the intercept)");
        note(f, "graph replay: %.3g us per node beyond the launch (not a profile parameter)", lf.coef[1]);
        for (size_t i = 0; i < s.n; i++) pred[i] = lf.coef[0] + lf.coef[1] * X[2 * i + 1];
        resid(f, "graph_replay", pred, y, s.n);
    }
    free(X);
    free(y);
    free(w);
    free(pred);
    free(s.v);
    return rc;
}

/* ---- driver ---------------------------------------------------------------------------------- */

/* kbench's kernels timed as in a layer rather than alone after an L2 flush ("<layout>;after_...":
 * with the layer's GEMMs queued behind them, or with nothing behind as their twin; kernels suite
 * sec_after_layer): what a decode's kernels pay for the GEMMs queued behind them
 * (validation/data/h200-2157-behind). Only fit_after_layer reads them; every kernel's own line
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
        } else if (c == HELDOUT_HELD) {
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
