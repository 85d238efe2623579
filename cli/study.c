#include "cli/study.h"
#include "common/version.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/study_cfg.h"
#include "cli/study_class.h"
#include "cli/study_int.h"
#include "common/atomicio.h"
#include "models/calib.h"
#include "models/cost.h"
#include "models/hwcat.h"
#include "models/hwinst.h"
#include "models/llm.h"
#include "sim/exec.h"
#include "sim/sim.h"

int study_open_doc(cfg_doc_t *doc, const char *name, study_t **out, err_t *e)
{
    *out = NULL;
    study_t *s = calloc(1, sizeof *s);
    if (!s) {
        cfg_free(doc);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    s->doc = doc;
    s->name = strdup(name ? name : "scenario");
    int rc = s->name ? study_sweep_init(s, e) : err_set(e, ERR_NOMEM, "out of memory");
    if (!rc) rc = study_catalogs_load(s, e);
    /* Each axis value checked now, so a bad value fails before anything runs; the points themselves
     * (a Fathom method's planner statistics take ~65 ms) are resolved as they run. */
    if (!rc) rc = study_points_check(s, e);
    if (rc) {
        study_free(s);
        return rc;
    }
    *out = s;
    return ERR_OK;
}

int study_open(const char *path, const char *const *sets, size_t n_sets, study_t **out, err_t *e)
{
    *out = NULL;
    cfg_doc_t *doc;
    /* a scenario named by a path that is not here is looked up under the data root, as every path */
    char *found = study_data_path(path);
    int rc = found ? cfg_parse_file(found, &doc, e) : err_set(e, ERR_NOMEM, "out of memory");
    free(found);
    if (rc) return rc;
    for (size_t i = 0; !rc && i < n_sets; i++) rc = cfg_set(doc, sets[i], "--set", e);
    if (rc) {
        cfg_free(doc);
        return rc;
    }
    return study_open_doc(doc, path, out, e);
}

size_t study_methods_built(const study_t *s) { return s->methods_built; }

void study_free(study_t *s)
{
    if (!s) return;
    for (size_t i = 0; s->labels && i < s->n_points; i++) free(s->labels[i]);
    free(s->labels);
    free(s->axes);
    study_catalogs_free(s);
    cfg_free(s->doc);
    free(s->name);
    free(s->root);
    free(s);
}

/* ---- replications and their aggregate ------------------------------------------------------ */

study_stat_t study_stat_of(const double *x, size_t n)
{
    study_stat_t st = {NAN, NAN, NAN, 0};
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i])) sum += x[i], st.n++;
    if (!st.n) return st;
    st.mean = sum / (double)st.n;
    if (st.n < 2) return st;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i])) ss += (x[i] - st.mean) * (x[i] - st.mean);
    double half = gsl_cdf_tdist_Pinv(0.975, (double)(st.n - 1)) * sqrt(ss / (double)(st.n - 1) / (double)st.n);
    st.lo = st.mean - half;
    st.hi = st.mean + half;
    return st;
}

enum { M_STEP50, M_STEP95, M_STEP99, M_STEPMEAN, M_TTFT50, M_TTFT95, M_TTFT99, M_TPS_SESS, M_TPS_TOTAL, M_SLO, M_PF50, M_PF99,
       M_COUNT };

/* The figures of statistics st (the box's or a class's) whose measured window of measured_s seconds
 * decoded measured_tokens tokens. */
static void fill_metrics(const exec_stats_t *st, uint64_t measured_tokens, double measured_s, double *m)
{
    /* a histogram with no sample gives no figure (NAN), never 0 */
    bool steps = hist_count(st->step_s) > 0, ttfts = hist_count(st->ttft_s) > 0;
    m[M_STEP50] = steps ? hist_quantile(st->step_s, 0.50) : NAN;
    m[M_STEP95] = steps ? hist_quantile(st->step_s, 0.95) : NAN;
    m[M_STEP99] = steps ? hist_quantile(st->step_s, 0.99) : NAN;
    m[M_STEPMEAN] = steps ? hist_mean(st->step_s) : NAN;
    m[M_TTFT50] = ttfts ? hist_quantile(st->ttft_s, 0.50) : NAN;
    m[M_TTFT95] = ttfts ? hist_quantile(st->ttft_s, 0.95) : NAN;
    m[M_TTFT99] = ttfts ? hist_quantile(st->ttft_s, 0.99) : NAN;
    m[M_TPS_SESS] = hist_count(st->session_tps) ? hist_mean(st->session_tps) : NAN;
    m[M_TPS_TOTAL] = measured_s > 0 ? (double)measured_tokens / measured_s : NAN;
    /* Turns still running count once their outcome is decided (a missed first token, a slow rate). */
    double judged = (double)(st->turns_done + st->open_slo_ok + st->open_slo_missed);
    m[M_SLO] = judged > 0 ? (double)(st->turns_slo_ok + st->open_slo_ok) / judged : NAN;
    bool chunks = hist_count(st->prefill_chunk_s) > 0;
    m[M_PF50] = chunks ? hist_quantile(st->prefill_chunk_s, 0.50) : NAN;
    m[M_PF99] = chunks ? hist_quantile(st->prefill_chunk_s, 0.99) : NAN;
}

/* Met when enough judged turns meet it and the box's p99 step is within bound; a run that judged no
 * turn has shown nothing, which is not meeting it. */
static bool rep_meets_slo(const exec_stats_t *st, const scn_slo_t *slo, const double *m)
{
    if (!(st->turns_done + st->open_slo_ok + st->open_slo_missed) || !(m[M_SLO] >= slo->attainment)) return false;
    return slo->step_p99_s <= 0 || m[M_STEP99] <= slo->step_p99_s;
}

/* The figures over replications of m (reps rows of M_COUNT, one every `stride` values) into dst. */
static void stats_over(const double *m, uint32_t reps, size_t stride, study_stat_t *const dst[M_COUNT])
{
    double col[1000];
    for (int j = 0; j < M_COUNT; j++) {
        for (uint32_t k = 0; k < reps; k++) col[k] = m[(size_t)k * stride + (size_t)j];
        *dst[j] = study_stat_of(col, reps);
    }
}

/* The headline figures: run.ci_target asks each of their intervals to be within ±target. */
static const int ci_figures[] = {M_STEP50, M_STEP99, M_TTFT50, M_TTFT99, M_TPS_SESS};

/* Whether the intervals of the headline figures over replications 0..reps of m (M_COUNT a row) are
 * each within ±target of their figure; a figure no replication gave (no turn's first token) asks
 * nothing, one given by fewer than two has no interval yet. */
static bool ci_within(const double *m, uint32_t reps, double target)
{
    double col[1000];
    for (size_t j = 0; j < sizeof ci_figures / sizeof *ci_figures; j++) {
        for (uint32_t k = 0; k < reps; k++) col[k] = m[(size_t)k * M_COUNT + (size_t)ci_figures[j]];
        study_stat_t st = study_stat_of(col, reps);
        if (st.n && !(st.hi - st.mean <= target * fabs(st.mean))) return false;
    }
    return true;
}

/* Replication k's own figures (STUDY_REP_*) from its run and its row of m. */
static void rep_figs_take(const study_rep_t *rep, const double *m, double *f)
{
    f[STUDY_REP_DURATION_S] = rep->measured_s + rep->warmup_s;
    f[STUDY_REP_WARMUP_S] = rep->warmup_s;
    f[STUDY_REP_MEAN_TURN_S] = rep->mean_turn_s;
    f[STUDY_REP_WINDOW_TURNS] = rep->window_turns;
    f[STUDY_REP_STEP_P50_S] = m[M_STEP50];
    f[STUDY_REP_STEP_P99_S] = m[M_STEP99];
    f[STUDY_REP_TTFT_P50_S] = m[M_TTFT50];
    f[STUDY_REP_TTFT_P99_S] = m[M_TTFT99];
    f[STUDY_REP_TPS_SESSION] = m[M_TPS_SESS];
}

/* Replication k's figures of each class of pt into m (M_COUNT per class), whether each met the SLO
 * into met; from replication 0 the classes' counts and names into r->classes. */
static int classes_take(const study_point_t *pt, const study_rep_t *rep, uint32_t k, double *m, uint32_t *met,
                        study_result_t *r, err_t *e)
{
    for (uint32_t c = 0; c < pt->n_classes; c++) {
        const exec_stats_t *st = exec_group_stats(rep->x, c);
        uint64_t tokens = st->decode_tokens - study_classes_tokens_at_warmup(rep->classes, c);
        fill_metrics(st, tokens, rep->measured_s, m + (size_t)c * M_COUNT);
        /* a class that drew no session (a population smaller than its classes) has nothing to fail */
        met[c] += !study_classes_sessions(rep->classes, c) || rep_meets_slo(st, &pt->slo, m + (size_t)c * M_COUNT);
        if (k) continue;
        study_class_result_t *cr = &r->classes[c];
        cr->name = strdup(pt->classes[c].name);
        cr->method = strdup(method_name(study_classes_method(rep->classes, c)));
        if (!cr->name || !cr->method) return err_set(e, ERR_NOMEM, "out of memory");
        cr->share = pt->classes[c].share;
        cr->decode_tokens = st->decode_tokens;
        cr->prefill_tokens = st->prefill_tokens;
        cr->sessions = study_classes_sessions(rep->classes, c);
        cr->turns = st->turns_done;
        cr->preemptions = st->preemptions;
        cr->evictions = st->evictions;
        cr->waiting = st->sessions_waiting;
    }
    return ERR_OK;
}

int study_run(study_t *s, size_t i, const study_opts_t *opts, study_result_t **out, err_t *e)
{
    *out = NULL;
    if (i >= s->n_points) return err_set(e, ERR_INVAL, "study: point %zu of %zu", i, s->n_points);
    study_point_t pt;
    int rc = study_point_resolve(s, i, &pt, e);
    if (rc) return rc;
    /* With ci_target the replications run in order until the first count (at least run.replications,
     * and two for an interval) whose intervals reach it: one point's replications run in one process,
     * so the count, like every figure, is the same whatever the ranks (cli/par.h). */
    bool fixed = opts && opts->replications > 0, ci = !fixed && pt.run.ci_target > 0;
    uint32_t reps = fixed ? (uint32_t)opts->replications : (uint32_t)pt.run.replications;
    uint32_t reps_max = ci ? (uint32_t)pt.run.max_replications : reps, reps_min = ci && reps < 2 ? 2 : reps;
    if (reps_min > reps_max) reps_min = reps_max;
    study_result_t *r = calloc(1, sizeof *r);
    double *m = calloc((size_t)reps_max * M_COUNT, sizeof *m);
    if (r) r->rep_figs = calloc((size_t)reps_max * STUDY_REP_N, sizeof *r->rep_figs);
    size_t ncl = pt.n_classes, cstride = ncl * M_COUNT;  /* class figures: reps rows of ncl x M_COUNT */
    double *mc = ncl ? calloc((size_t)reps_max * cstride, sizeof *mc) : NULL;
    uint32_t met = 0, *met_c = ncl ? calloc(ncl, sizeof *met_c) : NULL;
    if (r && ncl) r->classes = calloc(ncl, sizeof *r->classes);
    if (!r || !m || !r->rep_figs || (ncl && (!mc || !met_c || !r->classes))) rc = err_set(e, ERR_NOMEM, "out of memory");
    bool transient = false;
    double window_turns = INFINITY;
    if (!rc) r->n_classes = ncl;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint32_t ran = 0;
    for (uint32_t k = 0; !rc && k < reps_max; k++) {
        if (k >= reps_min && ci_within(m, k, pt.run.ci_target)) break;
        study_rep_t rep;
        rc = study_rep_run(s, &pt, k, reps_max, opts, &rep, e);
        if (rc) break;
        fill_metrics(rep.stats, rep.measured_tokens, rep.measured_s, m + (size_t)k * M_COUNT);
        rep_figs_take(&rep, m + (size_t)k * M_COUNT, r->rep_figs + (size_t)k * STUDY_REP_N);
        r->events += sim_events(rep.sim);
        r->simulated_s += rep.measured_s + rep.warmup_s;
        met += rep_meets_slo(rep.stats, &pt.slo, m + (size_t)k * M_COUNT);
        transient = transient || (pt.run.duration_auto && !rep.steady);
        if (rep.window_turns < window_turns) window_turns = rep.window_turns;
        if (ncl) rc = classes_take(&pt, &rep, k, mc + (size_t)k * cstride, met_c, r, e);
        if (!rc && k == 0) rc = study_result_fill(s, &pt, &rep, r, e);
        study_rep_free(&rep);
        ran = k + 1;
    }
    reps = ran;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (r) r->wall_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (!rc) {
        study_stat_t *dst[M_COUNT] = {&r->step_p50_s, &r->step_p95_s, &r->step_p99_s, &r->step_mean_s, &r->ttft_p50_s,
                                      &r->ttft_p95_s, &r->ttft_p99_s, &r->tps_session_mean, &r->tps_total,
                                      &r->slo_attainment, &r->prefill_p50_s, &r->prefill_p99_s};
        stats_over(m, reps, M_COUNT, dst);
        r->replications = reps;
        r->duration_auto = pt.run.duration_auto;
        r->transient = transient;
        r->steady_turns = pt.run.steady_turns;
        r->window_turns = isfinite(window_turns) ? window_turns : 0;
        r->ci_target = pt.run.ci_target;
        r->ci_reached = pt.run.ci_target > 0 && reps >= 2 && ci_within(m, reps, pt.run.ci_target);
        /* a transient point has not shown what it does once steady: it meets nothing */
        r->slo_met = !transient && (double)met >= 0.95 * (double)reps;
        for (size_t c = 0; c < ncl; c++) {
            study_class_result_t *cr = &r->classes[c];
            study_stat_t *cdst[M_COUNT] = {&cr->step_p50_s, &cr->step_p95_s, &cr->step_p99_s, &cr->step_mean_s,
                                           &cr->ttft_p50_s, &cr->ttft_p95_s, &cr->ttft_p99_s, &cr->tps_session_mean,
                                           &cr->tps_total, &cr->slo_attainment, &cr->prefill_p50_s, &cr->prefill_p99_s};
            stats_over(mc + c * M_COUNT, reps, cstride, cdst);
            cr->slo_met = !transient && (double)met_c[c] >= 0.95 * (double)reps;
            r->slo_met = r->slo_met && cr->slo_met; /* a capacity holds only where every class's SLO does */
        }
        r->label = strdup(s->labels[i]);
        if (!r->label) rc = err_set(e, ERR_NOMEM, "out of memory");
    }
    free(m);
    free(mc);
    free(met_c);
    study_point_free(&pt);
    if (rc) {
        study_result_free(r);
        return rc;
    }
    *out = r;
    return ERR_OK;
}

void study_result_free(study_result_t *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_res; i++) {
        free(r->res[i].name);
        free(r->res[i].unit);
    }
    for (size_t i = 0; i < r->n_lost; i++) free(r->lost[i].name);
    for (size_t c = 0; r->classes && c < r->n_classes; c++) {
        free(r->classes[c].name);
        free(r->classes[c].method);
    }
    free(r->classes);
    free(r->rep_figs);
    free(r->res);
    free(r->lost);
    free(r->label);
    free(r->binding);
    free(r->placement);
    free(r->flags);
    free(r->ctx_tokens);
    free(r->ctx_step_s);
    free(r->util_t_s);
    free(r->util);
    free(r);
}
