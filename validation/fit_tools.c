/* fit_tools — what the per-family fitters share (validation/fit_int.h): recording a fitted
 * parameter, its residuals and notes, selecting rows, line fits and the minimum-of-terms fit. The
 * driver and the fitters call it; it calls neither. */
#include "validation/fit.h"
#include "validation/fit_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

__attribute__((format(printf, 2, 3))) void note(fit_t *f, const char *fmt, ...)
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

int sel_add(sel_t *s, const kbrow_t *r)
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
void put(fit_t *f, const char *name, double value, double se, double lo, double hi,
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
void resid(fit_t *f, const char *name, const double *pred, const double *meas, size_t n)
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

const fit_param_t *fit_find(const fit_t *f, const char *name)
{
    for (size_t i = 0; i < f->n_p; i++)
        if (!strcmp(f->p[i].name, name)) return &f->p[i];
    return NULL;
}

/* The fitted value of name, else the seed's. */
int value_of(const fit_t *f, const calib_t *seed, const char *name, double *out, err_t *e)
{
    const fit_param_t *p = fit_find(f, name);
    if (p) {
        *out = p->value;
        return ERR_OK;
    }
    return calib_get(seed, name, out, e);
}

bool is_op(const kbrow_t *r, int kind) { return r->op == kind; }
bool alone(const kbrow_t *r) { return isnan(r->concurrent_id) && strncmp(r->policy, "mix:", 4); }

/* The most common value of a text field among rows (NULL when none). */
const char *mode_of(const sel_t *s, const char *(*get)(const kbrow_t *))
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

const char *get_alloc(const kbrow_t *r) { return r->allocator; }
const char *get_variant(const kbrow_t *r) { return r->variant; }

void range_of(const sel_t *s, double (*get)(const kbrow_t *), double *lo, double *hi)
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

double get_piece(const kbrow_t *r) { return r->piece_bytes; }
double get_bytes(const kbrow_t *r) { return r->bytes_moved; }
double get_blocks(const kbrow_t *r) { return r->blocks; }
double get_batch(const kbrow_t *r) { return r->batch; }
double get_pieces(const kbrow_t *r) { return r->pieces; }

/* The line t_med ≈ coef[0] + coef[1]·max(x(row), floor) over rows s, in relative terms
 * (lsq_line_rel). */
int line_floor(const sel_t *s, double (*x)(const kbrow_t *), double floor, const char *what, lsq_fit_t *lf,
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
int line_of(const sel_t *s, double (*x)(const kbrow_t *), const char *what, lsq_fit_t *lf, err_t *e)
{
    return line_floor(s, x, -INFINITY, what, lf, e);
}

/* ---- piecewise fits: log y_i = min_j (θ_j + c_ij) ------------------------------------------ */

/* Fits θ (m ≤ 8 terms) to n rows: alternately assigns each row to its binding term (the argmin)
 * and sets each θ_j to the mean of y_i − c_ij over its rows. c_ij = −INFINITY... is written as NAN
 * for a term that does not apply to row i. A term with no rows keeps its start value (the data
 * bound it only from one side: term_n[j] = 0). Errors: ERR_CONVERGE. */
int minfit(const char *what, const double *y, const double *c, size_t n, size_t m, double *theta,
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
