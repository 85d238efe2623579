/* fit_gather — fitters of the SM gather forms: rows per second by region, TLB, knots, planes,
 * prefix, zero-copy scans, and the sharing between paths. */
#include "validation/fit_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double knot_bytes[4] = {0.25 * GIB, 1 * GIB, 4 * GIB, 16 * GIB};
static const char *const knot_names[4] = {"gather_rows_Mps_256MiB", "gather_rows_Mps_1GiB",
                                          "gather_rows_Mps_4GiB", "gather_rows_Mps_16GiB"};

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
int fit_strided(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
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
int fit_gather_tlb(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
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
int fit_gather_knots(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
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
int fit_plane_knots(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
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
int fit_prefix(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
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
int fit_zc_scan(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
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

bool has_variant(const sel_t *rows, int kind, const char *variant)
{
    for (size_t i = 0; i < rows->n; i++)
        if (is_op(rows->v[i], kind) && !strcmp(rows->v[i]->variant, variant)) return true;
    return false;
}

/* A gather's fixed time, from kbench's payload sweep (variant "v2_payload": 4 KiB pieces over 256 MiB,
 * where neither the row rate nor the blocks bind, payloads 64 KiB-64 MiB): t = lat + payload/rate,
 * WLS 1/t². The rate is the grid fit's (fit_gather) to set; only the fixed time is kept. */
int fit_gather_latency(fit_t *f, const sel_t *rows, err_t *e)
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

int fit_gather(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
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

int fit_sharing(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e)
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

