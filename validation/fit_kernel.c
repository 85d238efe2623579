/* fit_kernel — fitters of the HBM kernel forms: pooled and per-op lines, scan families, attention
 * (dense, L2, per query head, combine) and top-k. */
#include "validation/fit_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int fit_kernels(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
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

