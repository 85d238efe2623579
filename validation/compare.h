/* compare — predicted against measured, per held-out case and per group.
 *
 * Each case compares p50 (t_med_us), p99 (t_p99_us) and throughput (per_s) separately, where the
 * measurement has them: error % = 100·(predicted − measured)/measured. The measured p10..p90
 * spread is kept for reports. A group summary gives, over every compared value of its cases
 * (p50, p99 and throughput pooled), the median and the maximum absolute error %, and the same per
 * metric. A case whose prediction failed counts in n_failed and in no statistic. */
#ifndef ODSIM_VALIDATION_COMPARE_H
#define ODSIM_VALIDATION_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include "common/err.h"
#include "validation/kbcsv.h"

typedef struct cmp_pred {
    double p50_us, p99_us, tput_per_s;   /* NAN: not predicted */
} cmp_pred_t;

typedef struct cmp_case {
    const char *group;
    const kbrow_t *row;
    bool ok;                             /* a prediction was made */
    const char *error;                   /* why not ("" when ok) */
    const char *flags;                   /* calibration flags of the prediction ("" none) */
    const char *scenario;                /* the scenario YAML that made it */
    double meas_p50_us, meas_p10_us, meas_p90_us, meas_p99_us, meas_tput_per_s;
    cmp_pred_t pred;
    double err_p50_pct, err_p99_pct, err_tput_pct; /* NAN: not compared */
    double floor_p50_pct, floor_p99_pct, floor_tput_pct; /* run to run: the largest |difference| % of
                                                           * other runs' measurements (NAN: none) */
    /* Flagged (cmp_set_clamp): clamping the parameters the prediction used outside their fitted
     * range (`clamped`, comma-separated; "" none) moves a compared value by more than CMP_FLAG_PCT. */
    const char *clamped;
    cmp_pred_t pred_clamped;             /* the prediction with them clamped (NAN: none made) */
    double clamp_shift_pct;              /* largest |relative change| % of a compared value (NAN: none) */
    bool flagged;
    const char *flagged_by;              /* the parameters whose clamp alone moves it past CMP_FLAG_PCT
                                          * (all of `clamped` where none does alone); "" when not flagged */
} cmp_case_t;

/* A case is flagged when clamping moves a compared value by more than this, % relative. */
#define CMP_FLAG_PCT 1.0

typedef struct cmp_stat {
    size_t n;
    double median_abs_err_pct, max_abs_err_pct;  /* NAN when n = 0 */
} cmp_stat_t;

typedef struct cmp_group {
    const char *name;
    size_t n_cases, n_failed, n_flagged;
    cmp_stat_t all, p50, p99, tput;
    size_t n_floored, n_beyond;          /* compared values with a run-to-run floor; those past it */
} cmp_group_t;

typedef struct cmp cmp_t;

/* Errors: ERR_NOMEM. */
int cmp_new(cmp_t **out, err_t *e);
void cmp_free(cmp_t *c);

/* Adds a case of `group` for row (which must outlive c). pred NULL: the prediction failed with
 * `error`. flags and scenario may be NULL. Strings are copied. Errors: ERR_NOMEM. */
int cmp_add(cmp_t *c, const char *group, const kbrow_t *row, const cmp_pred_t *pred, const char *error,
            const char *flags, const char *scenario, err_t *e);

/* Sets case i's run-to-run floor from other runs' measurements of the same case (others[0..n), NULL
 * entries skipped; only read during the call): per compared metric the largest |difference| %, NAN
 * where none measured it; then updates the summaries: a compared value whose |error| exceeds its
 * floor counts in its group's n_beyond. Errors: ERR_INVAL (no case i), ERR_NOMEM. */
int cmp_set_floor(cmp_t *c, size_t i, const kbrow_t *const *others, size_t n, err_t *e);

/* The largest |b − a| / |a| in % over the values case cs compares (its error not NAN) where both
 * are predicted; 0 when none; NAN when b lacks one that a has. */
double cmp_shift_pct(const cmp_case_t *cs, const cmp_pred_t *a, const cmp_pred_t *b);

/* Records case i's clamped prediction: `clamped` the parameters clamped, pred the prediction with
 * them clamped (NULL: it failed, and the case is flagged), `by` those that alone move it (NULL or
 * "": all of clamped). The case is flagged when the shift exceeds CMP_FLAG_PCT. Strings are copied.
 * Errors: ERR_INVAL (no case i, or it has no prediction), ERR_NOMEM. */
int cmp_set_clamp(cmp_t *c, size_t i, const char *clamped, const cmp_pred_t *pred, const char *by, err_t *e);

size_t cmp_n_cases(const cmp_t *c);
const cmp_case_t *cmp_case_at(const cmp_t *c, size_t i);
/* Groups in order of first appearance, summaries up to date. */
size_t cmp_n_groups(const cmp_t *c);
const cmp_group_t *cmp_group_at(const cmp_t *c, size_t i);

/* True when every group has no failed case, at least one compared value, a median absolute error
 * ≤ median_pct and a maximum ≤ max_pct (pooled). Otherwise writes the first offence to why. */
bool cmp_within(const cmp_t *c, double median_pct, double max_pct, char *why, size_t why_len);

#endif
