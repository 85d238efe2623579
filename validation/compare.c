#include "validation/compare.h"
#include "common/str.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cmp_case_priv {
    cmp_case_t pub;
    char *group, *error, *flags, *scenario, *clamped, *flagged_by;
} cmp_case_priv_t;

struct cmp {
    cmp_case_priv_t *cases;
    size_t n, cap;
    cmp_group_t *groups;
    size_t n_groups;
};

int cmp_new(cmp_t **out, err_t *e)
{
    *out = calloc(1, sizeof **out);
    return *out ? ERR_OK : err_set(e, ERR_NOMEM, "compare: out of memory");
}

void cmp_free(cmp_t *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->cases[i].group);
        free(c->cases[i].error);
        free(c->cases[i].flags);
        free(c->cases[i].scenario);
        free(c->cases[i].clamped);
        free(c->cases[i].flagged_by);
    }
    free(c->cases);
    free(c->groups);
    free(c);
}

static double err_pct(double pred, double meas)
{
    if (isnan(pred) || isnan(meas) || !(meas > 0)) return NAN;
    return 100.0 * (pred - meas) / meas;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). NAN when n = 0. */
static double cmp_median(double *v, size_t n)
{
    if (!n) return NAN;
    qsort(v, n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Summary of the absolute values of v[0..n) (NANs skipped; v is reordered). */
static cmp_stat_t stat_of(double *v, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i])) v[k++] = fabs(v[i]);
    cmp_stat_t s = {k, NAN, NAN};
    if (!k) return s;
    s.median_abs_err_pct = cmp_median(v, k);
    s.max_abs_err_pct = v[k - 1];
    return s;
}

/* Recomputes every group's summary. Errors: ERR_NOMEM. */
static int summarise(cmp_t *c, err_t *e)
{
    free(c->groups);
    c->groups = NULL;
    c->n_groups = 0;
    cmp_group_t *g = calloc(c->n ? c->n : 1, sizeof *g);
    double *all = malloc((3 * c->n + 1) * sizeof *all), *m[3];
    for (int j = 0; j < 3; j++) m[j] = malloc((c->n + 1) * sizeof *m[j]);
    int rc = (!g || !all || !m[0] || !m[1] || !m[2]) ? err_set(e, ERR_NOMEM, "compare: out of memory") : ERR_OK;
    size_t ng = 0;
    for (size_t i = 0; !rc && i < c->n; i++) {
        const char *name = c->cases[i].pub.group;
        bool seen = false;
        for (size_t j = 0; j < ng && !seen; j++) seen = !strcmp(g[j].name, name);
        if (seen) continue;
        cmp_group_t *gr = &g[ng++];
        gr->name = name;
        size_t na = 0, nm[3] = {0, 0, 0};
        for (size_t k = i; k < c->n; k++) {
            const cmp_case_t *cs = &c->cases[k].pub;
            if (strcmp(cs->group, name)) continue;
            gr->n_cases++;
            if (!cs->ok) {
                gr->n_failed++;
                continue;
            }
            gr->n_flagged += cs->flagged;
            double ev[3] = {cs->err_p50_pct, cs->err_p99_pct, cs->err_tput_pct};
            double fl[3] = {cs->floor_p50_pct, cs->floor_p99_pct, cs->floor_tput_pct};
            for (int j = 0; j < 3; j++) {
                m[j][nm[j]++] = ev[j];
                all[na++] = ev[j];
                if (isnan(ev[j]) || isnan(fl[j])) continue;
                gr->n_floored++;
                gr->n_beyond += fabs(ev[j]) > fl[j];
            }
        }
        gr->all = stat_of(all, na);
        gr->p50 = stat_of(m[0], nm[0]);
        gr->p99 = stat_of(m[1], nm[1]);
        gr->tput = stat_of(m[2], nm[2]);
    }
    free(all);
    for (int j = 0; j < 3; j++) free(m[j]);
    if (rc) {
        free(g);
        return rc;
    }
    c->groups = g;
    c->n_groups = ng;
    return ERR_OK;
}

int cmp_add(cmp_t *c, const char *group, const kbrow_t *row, const cmp_pred_t *pred, const char *error,
            const char *flags, const char *scenario, err_t *e)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        cmp_case_priv_t *nv = realloc(c->cases, cap * sizeof *nv);
        if (!nv) return err_set(e, ERR_NOMEM, "compare: out of memory");
        c->cases = nv;
        c->cap = cap;
        for (size_t i = 0; i < c->n; i++) {  /* the public strings point at the private copies */
            c->cases[i].pub.group = c->cases[i].group;
            c->cases[i].pub.error = c->cases[i].error;
            c->cases[i].pub.flags = c->cases[i].flags;
            c->cases[i].pub.scenario = c->cases[i].scenario;
            c->cases[i].pub.clamped = c->cases[i].clamped ? c->cases[i].clamped : "";
            c->cases[i].pub.flagged_by = c->cases[i].flagged_by ? c->cases[i].flagged_by : "";
        }
    }
    cmp_case_priv_t *p = &c->cases[c->n];
    memset(p, 0, sizeof *p);
    p->group = str_dup((group) ? (group) : "");
    p->error = str_dup(pred || !error ? "" : error);
    p->flags = str_dup((flags) ? (flags) : "");
    p->scenario = str_dup((scenario) ? (scenario) : "");
    if (!p->group || !p->error || !p->flags || !p->scenario) {
        free(p->group);
        free(p->error);
        free(p->flags);
        free(p->scenario);
        return err_set(e, ERR_NOMEM, "compare: out of memory");
    }
    cmp_case_t *cs = &p->pub;
    cs->group = p->group;
    cs->error = p->error;
    cs->flags = p->flags;
    cs->scenario = p->scenario;
    cs->clamped = cs->flagged_by = "";
    cs->pred_clamped = (cmp_pred_t){NAN, NAN, NAN};
    cs->clamp_shift_pct = NAN;
    cs->row = row;
    cs->ok = pred != NULL;
    cs->meas_p50_us = row->t_med_us;
    cs->meas_p10_us = row->t_p10_us;
    cs->meas_p90_us = row->t_p90_us;
    cs->meas_p99_us = row->t_p99_us;
    cs->meas_tput_per_s = row->per_s;
    cs->pred = pred ? *pred : (cmp_pred_t){NAN, NAN, NAN};
    cs->err_p50_pct = err_pct(cs->pred.p50_us, cs->meas_p50_us);
    cs->err_p99_pct = err_pct(cs->pred.p99_us, cs->meas_p99_us);
    cs->err_tput_pct = err_pct(cs->pred.tput_per_s, cs->meas_tput_per_s);
    cs->floor_p50_pct = cs->floor_p99_pct = cs->floor_tput_pct = NAN;
    c->n++;
    return summarise(c, e);
}

/* The larger of floor and |other - meas| % where the metric is compared (err not NAN). */
static double widen(double floor, double err, double other, double meas)
{
    double d = isnan(err) ? NAN : fabs(err_pct(other, meas));
    return isnan(d) || d <= floor ? floor : d;
}

int cmp_set_floor(cmp_t *c, size_t i, const kbrow_t *const *others, size_t n, err_t *e)
{
    if (i >= c->n) return err_set(e, ERR_INVAL, "compare: no case %zu", i);
    cmp_case_t *cs = &c->cases[i].pub;
    cs->floor_p50_pct = cs->floor_p99_pct = cs->floor_tput_pct = NAN;
    for (size_t k = 0; k < n; k++) {
        const kbrow_t *o = others[k];
        if (!o) continue;
        cs->floor_p50_pct = widen(cs->floor_p50_pct, cs->err_p50_pct, o->t_med_us, cs->meas_p50_us);
        cs->floor_p99_pct = widen(cs->floor_p99_pct, cs->err_p99_pct, o->t_p99_us, cs->meas_p99_us);
        cs->floor_tput_pct = widen(cs->floor_tput_pct, cs->err_tput_pct, o->per_s, cs->meas_tput_per_s);
    }
    return summarise(c, e);
}

double cmp_shift_pct(const cmp_case_t *cs, const cmp_pred_t *a, const cmp_pred_t *b)
{
    double err[3] = {cs->err_p50_pct, cs->err_p99_pct, cs->err_tput_pct};
    double va[3] = {a->p50_us, a->p99_us, a->tput_per_s}, vb[3] = {b->p50_us, b->p99_us, b->tput_per_s};
    double most = 0;
    for (int j = 0; j < 3; j++) {
        if (isnan(err[j]) || isnan(va[j]) || !(va[j] != 0)) continue;
        if (isnan(vb[j])) return NAN;
        most = fmax(most, 100.0 * fabs(vb[j] - va[j]) / fabs(va[j]));
    }
    return most;
}

int cmp_set_clamp(cmp_t *c, size_t i, const char *clamped, const cmp_pred_t *pred, const char *by, err_t *e)
{
    if (i >= c->n || !c->cases[i].pub.ok) return err_set(e, ERR_INVAL, "compare: no predicted case %zu", i);
    cmp_case_priv_t *p = &c->cases[i];
    cmp_case_t *cs = &p->pub;
    cs->pred_clamped = pred ? *pred : (cmp_pred_t){NAN, NAN, NAN};
    cs->clamp_shift_pct = pred ? cmp_shift_pct(cs, &cs->pred, pred) : NAN;
    cs->flagged = !(cs->clamp_shift_pct <= CMP_FLAG_PCT);
    char *cl = str_dup(clamped), *fb = str_dup(cs->flagged ? (by && *by ? by : clamped) : "");
    if (!cl || !fb) {
        free(cl);
        free(fb);
        return err_set(e, ERR_NOMEM, "compare: out of memory");
    }
    free(p->clamped);
    free(p->flagged_by);
    cs->clamped = p->clamped = cl;
    cs->flagged_by = p->flagged_by = fb;
    return summarise(c, e);
}

size_t cmp_n_cases(const cmp_t *c) { return c->n; }
const cmp_case_t *cmp_case_at(const cmp_t *c, size_t i) { return i < c->n ? &c->cases[i].pub : NULL; }
size_t cmp_n_groups(const cmp_t *c) { return c->n_groups; }
const cmp_group_t *cmp_group_at(const cmp_t *c, size_t i) { return i < c->n_groups ? &c->groups[i] : NULL; }

bool cmp_within(const cmp_t *c, double median_pct, double max_pct, char *why, size_t why_len)
{
    if (!c->n_groups) {
        snprintf(why, why_len, "no held-out cases");
        return false;
    }
    for (size_t i = 0; i < c->n_groups; i++) {
        const cmp_group_t *g = &c->groups[i];
        if (g->n_failed) {
            snprintf(why, why_len, "group %s: %zu of %zu predictions failed", g->name, g->n_failed, g->n_cases);
            return false;
        }
        if (!g->all.n) {
            snprintf(why, why_len, "group %s: nothing compared", g->name);
            return false;
        }
        if (g->all.median_abs_err_pct > median_pct || g->all.max_abs_err_pct > max_pct) {
            snprintf(why, why_len, "group %s: median |error| %.2f%% (bound %.0f%%), max %.2f%% (bound %.0f%%)", g->name,
                     g->all.median_abs_err_pct, median_pct, g->all.max_abs_err_pct, max_pct);
            return false;
        }
    }
    return true;
}
