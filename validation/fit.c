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
