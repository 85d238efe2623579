#include "validation/lsq.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct lsq_ws {
    gsl_matrix *X, *cov;
    gsl_vector *y, *w, *c;
} lsq_ws_t;

static void ws_free(lsq_ws_t *ws)
{
    gsl_matrix_free(ws->X);
    gsl_matrix_free(ws->cov);
    gsl_vector_free(ws->y);
    gsl_vector_free(ws->w);
    gsl_vector_free(ws->c);
}

static int ws_init(const char *what, const double *X, const double *y, const double *w, size_t n,
                   size_t p, lsq_ws_t *ws, err_t *e)
{
    memset(ws, 0, sizeof *ws);
    if (p == 0 || p > LSQ_MAX_P || n < p)
        return err_set(e, ERR_INVAL, "fit %s: %zu points for %zu parameters", what, n, p);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(y[i]) || (w && !(isfinite(w[i]) && w[i] > 0)))
            return err_set(e, ERR_INVAL, "fit %s: point %zu is not finite", what, i);
        for (size_t j = 0; j < p; j++)
            if (!isfinite(X[i * p + j])) return err_set(e, ERR_INVAL, "fit %s: point %zu is not finite", what, i);
    }
    ws->X = gsl_matrix_alloc(n, p);
    ws->cov = gsl_matrix_alloc(p, p);
    ws->y = gsl_vector_alloc(n);
    ws->w = gsl_vector_alloc(n);
    ws->c = gsl_vector_alloc(p);
    if (!ws->X || !ws->cov || !ws->y || !ws->w || !ws->c) {
        ws_free(ws);
        return err_set(e, ERR_NOMEM, "fit %s: out of memory", what);
    }
    for (size_t i = 0; i < n; i++) {
        gsl_vector_set(ws->y, i, y[i]);
        gsl_vector_set(ws->w, i, w ? w[i] : 1.0);
        for (size_t j = 0; j < p; j++) gsl_matrix_set(ws->X, i, j, X[i * p + j]);
    }
    return ERR_OK;
}

static int ws_finish(const char *what, lsq_ws_t *ws, size_t n, size_t p, double chi2, bool scale,
                     lsq_fit_t *out, err_t *e)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->p = p;
    out->chi2 = chi2;
    double s = scale ? (n > p ? chi2 / (double)(n - p) : 0.0) : 1.0;
    for (size_t j = 0; j < p; j++) {
        out->coef[j] = gsl_vector_get(ws->c, j);
        if (!isfinite(out->coef[j])) {
            ws_free(ws);
            return err_set(e, ERR_CONVERGE, "fit %s: did not converge (parameter %zu not finite; singular design?)", what, j);
        }
        for (size_t k = 0; k < p; k++) out->cov[j][k] = s * gsl_matrix_get(ws->cov, j, k);
        double v = out->cov[j][j];
        out->se[j] = n > p && v > 0 ? sqrt(v) : 0.0;
    }
    ws_free(ws);
    return ERR_OK;
}

int lsq_wlinear(const char *what, const double *X, const double *y, const double *w, size_t n, size_t p,
                lsq_fit_t *out, err_t *e)
{
    lsq_ws_t ws;
    int rc = ws_init(what, X, y, w, n, p, &ws, e);
    if (rc) return rc;
    gsl_multifit_linear_workspace *mw = gsl_multifit_linear_alloc(n, p);
    if (!mw) {
        ws_free(&ws);
        return err_set(e, ERR_NOMEM, "fit %s: out of memory", what);
    }
    double chi2 = 0;
    size_t rank = 0;
    int st = gsl_multifit_wlinear_tsvd(ws.X, ws.w, ws.y, 1e-12, ws.c, ws.cov, &chi2, &rank, mw);
    gsl_multifit_linear_free(mw);
    if (st || rank < p) {
        ws_free(&ws);
        return err_set(e, ERR_CONVERGE, "fit %s: did not converge (%s; rank %zu of %zu: parameters not separately determined)",
                       what, st ? gsl_strerror(st) : "rank deficient", rank, p);
    }
    return ws_finish(what, &ws, n, p, chi2, true, out, e);
}

int lsq_robust(const char *what, const double *X, const double *y, size_t n, size_t p, lsq_fit_t *out,
               err_t *e)
{
    lsq_ws_t ws;
    int rc = ws_init(what, X, y, NULL, n, p, &ws, e);
    if (rc) return rc;
    if (n <= p) {
        ws_free(&ws);
        return lsq_wlinear(what, X, y, NULL, n, p, out, e);
    }
    gsl_multifit_robust_workspace *rw = gsl_multifit_robust_alloc(gsl_multifit_robust_bisquare, n, p);
    if (!rw) {
        ws_free(&ws);
        return err_set(e, ERR_NOMEM, "fit %s: out of memory", what);
    }
    gsl_multifit_robust_maxiter(1000, rw);   /* GSL's 100 can stop IRLS short on heavy-tailed rows */
    int st = gsl_multifit_robust(ws.X, ws.y, ws.c, ws.cov, rw);
    gsl_multifit_robust_stats rs = gsl_multifit_robust_statistics(rw);
    gsl_multifit_robust_free(rw);
    if (st && st != GSL_EMAXITER) {
        ws_free(&ws);
        return err_set(e, ERR_CONVERGE, "fit %s: robust regression failed (%s)", what, gsl_strerror(st));
    }
    if (st == GSL_EMAXITER) {
        ws_free(&ws);
        return err_set(e, ERR_CONVERGE, "fit %s: robust regression did not converge", what);
    }
    return ws_finish(what, &ws, n, p, rs.sse, false, out, e);
}

int lsq_mean(const char *what, const double *v, size_t n, double *mean, double *se, err_t *e)
{
    double *X = malloc((n ? n : 1) * sizeof *X);
    if (!X) return err_set(e, ERR_NOMEM, "fit %s: out of memory", what);
    for (size_t i = 0; i < n; i++) X[i] = 1.0;
    lsq_fit_t f;
    int rc = lsq_wlinear(what, X, v, NULL, n, 1, &f, e);
    free(X);
    if (rc) return rc;
    *mean = f.coef[0];
    *se = f.se[0];
    return ERR_OK;
}

int lsq_line_rel(const char *what, const double *x, const double *t, size_t n, lsq_fit_t *out, err_t *e)
{
    double *X = malloc(2 * (n + 1) * sizeof *X), *w = malloc((n + 1) * sizeof *w);
    if (!X || !w) {
        free(X);
        free(w);
        return err_set(e, ERR_NOMEM, "fit %s: out of memory", what);
    }
    for (size_t i = 0; i < n; i++) {
        X[2 * i] = 1;
        X[2 * i + 1] = x[i];
        w[i] = 1.0 / (t[i] * t[i]);
    }
    int rc = lsq_wlinear(what, X, t, w, n, 2, out, e);
    free(X);
    free(w);
    return rc;
}

typedef struct nl_ctx {
    lsq_model_fn model;
    const void *ctx;
    const double *y, *w;
    size_t p;
} nl_ctx_t;

/* Residuals √w_i (m_i − y_i) and their Jacobian, for gsl_multifit_nlinear. */
static int nl_f(const gsl_vector *theta, void *data, gsl_vector *f)
{
    const nl_ctx_t *c = data;
    double g[LSQ_MAX_P];
    for (size_t i = 0; i < f->size; i++)
        gsl_vector_set(f, i, sqrt(c->w ? c->w[i] : 1.0) * (c->model(c->ctx, i, theta->data, g) - c->y[i]));
    return GSL_SUCCESS;
}

static int nl_df(const gsl_vector *theta, void *data, gsl_matrix *J)
{
    const nl_ctx_t *c = data;
    double g[LSQ_MAX_P];
    for (size_t i = 0; i < J->size1; i++) {
        c->model(c->ctx, i, theta->data, g);
        for (size_t j = 0; j < c->p; j++) gsl_matrix_set(J, i, j, sqrt(c->w ? c->w[i] : 1.0) * g[j]);
    }
    return GSL_SUCCESS;
}

int lsq_nlinear(const char *what, lsq_model_fn model, const void *ctx, const double *y, const double *w,
                size_t n, size_t p, const double *theta, lsq_fit_t *out, err_t *e)
{
    if (p == 0 || p > LSQ_MAX_P || n <= p) return err_set(e, ERR_INVAL, "fit %s: %zu points for %zu parameters", what, n, p);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(y[i]) || (w && !(isfinite(w[i]) && w[i] > 0))) return err_set(e, ERR_INVAL, "fit %s: point %zu is not finite", what, i);
    nl_ctx_t c = {model, ctx, y, w, p};
    gsl_multifit_nlinear_fdf fdf = {nl_f, nl_df, NULL, n, p, &c, 0, 0, 0};
    gsl_multifit_nlinear_parameters prm = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *ws = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &prm, n, p);
    gsl_matrix *cov = gsl_matrix_alloc(p, p);
    gsl_vector_const_view x0 = gsl_vector_const_view_array(theta, p);
    if (!ws || !cov) {
        if (ws) gsl_multifit_nlinear_free(ws);
        gsl_matrix_free(cov);
        return err_set(e, ERR_NOMEM, "fit %s: out of memory", what);
    }
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int info = 0, st = gsl_multifit_nlinear_init(&x0.vector, &fdf, ws);
    if (!st) st = gsl_multifit_nlinear_driver(200, 1e-10, 1e-10, 1e-12, NULL, NULL, &info, ws);
    int rc = ERR_OK;
    if (st) {
        rc = err_set(e, ERR_CONVERGE, "fit %s: nonlinear least squares did not converge (%s)", what, gsl_strerror(st));
        gsl_matrix_free(cov);
    } else {
        gsl_multifit_nlinear_covar(gsl_multifit_nlinear_jac(ws), 0.0, cov);
        gsl_vector *f = gsl_multifit_nlinear_residual(ws);
        double chi2 = 0;
        for (size_t i = 0; i < n; i++) chi2 += gsl_vector_get(f, i) * gsl_vector_get(f, i);
        lsq_ws_t res = {.cov = cov, .c = gsl_vector_alloc(p)};   /* ws_finish scales and frees them */
        if (!res.c) {
            gsl_matrix_free(cov);
            rc = err_set(e, ERR_NOMEM, "fit %s: out of memory", what);
        } else {
            gsl_vector_memcpy(res.c, gsl_multifit_nlinear_position(ws));
            rc = ws_finish(what, &res, n, p, chi2, true, out, e);
        }
    }
    gsl_set_error_handler(old);
    gsl_multifit_nlinear_free(ws);
    return rc;
}
