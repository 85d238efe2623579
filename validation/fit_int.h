/* fit_int — what the fit driver (validation/fit.c) and its fitters, one per cost-form family
 * (validation/fit_*.c), share: the fit under construction, row selections, bookkeeping. */
#ifndef ODSIM_VALIDATION_FIT_INT_H
#define ODSIM_VALIDATION_FIT_INT_H

#include <stdarg.h>
#include <stdbool.h>

#include "models/cost.h"
#include "models/hwcat.h"
#include "models/method_ops.h"
#include "models/opkind.h"
#include "validation/fit.h"
#include "validation/lsq.h"

#define FIT_MAX_ITER 200
#define GIB (1024.0 * 1024.0 * 1024.0)


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

/* A group of concurrent (mix) rows. */
typedef struct mixgrp {
    const kbrow_t *row[16];
    size_t n;
} mixgrp_t;

/* validation/fit.c */
__attribute__((format(printf, 2, 3))) void note(fit_t *f, const char *fmt, ...);
int sel_add(sel_t *s, const kbrow_t *r);
void put(fit_t *f, const char *name, double value, double se, double lo, double hi, const kbrow_t *const *rows, size_t n, const char *how);
void resid(fit_t *f, const char *name, const double *pred, const double *meas, size_t n);
int value_of(const fit_t *f, const calib_t *seed, const char *name, double *out, err_t *e);
bool is_op(const kbrow_t *r, int kind);
bool alone(const kbrow_t *r);
const char *mode_of(const sel_t *s, const char *(*get)(const kbrow_t *));
const char *get_alloc(const kbrow_t *r);
const char *get_variant(const kbrow_t *r);
void range_of(const sel_t *s, double (*get)(const kbrow_t *), double *lo, double *hi);
double get_piece(const kbrow_t *r);
double get_bytes(const kbrow_t *r);
double get_blocks(const kbrow_t *r);
double get_batch(const kbrow_t *r);
double get_pieces(const kbrow_t *r);
int line_floor(const sel_t *s, double (*x)(const kbrow_t *), double floor, const char *what, lsq_fit_t *lf, err_t *e);
int line_of(const sel_t *s, double (*x)(const kbrow_t *), const char *what, lsq_fit_t *lf, err_t *e);
int minfit(const char *what, const double *y, const double *c, size_t n, size_t m, double *theta, double *theta_se, size_t *term_n, int *assign, err_t *e);
/* validation/fit_link.c */
int fit_strided(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);
int fit_ce(fit_t *f, const sel_t *rows, err_t *e);
int mix_groups(const sel_t *rows, const char *policy, mixgrp_t **out, size_t *n_out);
int fit_duplex(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);
int fit_per_piece(fit_t *f, const sel_t *rows, const calib_t *seed, int kind, const char *name, double scale, const char *how, const char *group, err_t *e);
/* validation/fit_gather.c */
int fit_gather_tlb(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);
int fit_gather_knots(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);
int fit_plane_knots(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);
int fit_prefix(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);
int fit_zc_scan(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);
bool has_variant(const sel_t *rows, int kind, const char *variant);
int fit_gather_latency(fit_t *f, const sel_t *rows, err_t *e);
int fit_gather(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);
int fit_sharing(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);
/* validation/fit_kernel.c */
int fit_kernels(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);
/* validation/fit_gemm.c */
int fit_l2_writeback(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);
int fit_gemm(fit_t *f, const sel_t *rows, const calib_t *seed, err_t *e);
/* validation/fit_host.c */
void fit_handoff(fit_t *f, const sel_t *rows);
void fit_event(fit_t *f, const sel_t *rows);
int fit_overhead(fit_t *f, const sel_t *rows, int kind, const char *variant, const char *name, err_t *e);
int fit_jitter(fit_t *f, const sel_t *rows, err_t *e);
int fit_timeslice(fit_t *f, const sel_t *rows, err_t *e);
int fit_graph(fit_t *f, const sel_t *rows, err_t *e);

#endif
