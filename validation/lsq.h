/* lsq — least-squares fits through GSL, with standard errors from the covariance scaled by
 * χ²/(n−p) (the residual variance), as every fitted parameter of a profile reports them. */
#ifndef ODSIM_VALIDATION_LSQ_H
#define ODSIM_VALIDATION_LSQ_H

#include <stddef.h>
#include "common/err.h"

#define LSQ_MAX_P 8

typedef struct lsq_fit {
    size_t n, p;
    double coef[LSQ_MAX_P];
    double se[LSQ_MAX_P];      /* 0 when n ≤ p (not determined) */
    double cov[LSQ_MAX_P][LSQ_MAX_P]; /* scaled covariance */
    double chi2;               /* weighted residual sum of squares */
} lsq_fit_t;

/* Weighted linear least squares y ≈ X·coef, X n×p row-major, weights w (NULL: all 1), p ≤
 * LSQ_MAX_P, n ≥ p. Errors: ERR_INVAL (bad sizes, a non-finite input), ERR_CONVERGE (GSL failed or
 * the design is singular: names `what`), ERR_NOMEM. */
int lsq_wlinear(const char *what, const double *X, const double *y, const double *w, size_t n, size_t p,
                lsq_fit_t *out, err_t *e);

/* The line t ≈ coef[0] + coef[1]·x in relative terms (weights 1/t²: every point's relative error
 * counts alike), the form of every fixed-time-plus-rate fit. Errors as lsq_wlinear. */
int lsq_line_rel(const char *what, const double *x, const double *t, size_t n, lsq_fit_t *out, err_t *e);

/* Robust (bisquare) linear regression of y ≈ X·coef, unweighted; standard errors from GSL's
 * robust covariance. Errors as lsq_wlinear. */
int lsq_robust(const char *what, const double *X, const double *y, size_t n, size_t p, lsq_fit_t *out,
               err_t *e);

/* A model y_i ≈ m(x_i; θ) and its gradient ∂m/∂θ_j at point i (grad has p entries). */
typedef double (*lsq_model_fn)(const void *ctx, size_t i, const double *theta, double *grad);

/* Weighted nonlinear least squares Σ w_i (y_i − m(i; θ))² by gsl_multifit_nlinear (trust region,
 * Levenberg–Marquardt) from theta (p ≤ LSQ_MAX_P, n > p), covariance from its Jacobian at the
 * solution scaled by χ²/(n−p). Errors: ERR_INVAL (sizes, a non-finite input), ERR_CONVERGE (the solver
 * failed or stopped short: names `what`), ERR_NOMEM. */
int lsq_nlinear(const char *what, lsq_model_fn model, const void *ctx, const double *y, const double *w,
                size_t n, size_t p, const double *theta, lsq_fit_t *out, err_t *e);

/* The mean of v[0..n) as a one-parameter fit (se = sd/√n; 0 when n = 1). Errors as lsq_wlinear. */
int lsq_mean(const char *what, const double *v, size_t n, double *mean, double *se, err_t *e);

#endif
