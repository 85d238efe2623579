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
#include "cli/study_int.h"
#include "common/atomicio.h"
#include "models/calib.h"
#include "models/cost.h"
#include "models/hwcat.h"
#include "models/hwinst.h"
#include "models/llm.h"
#include "sim/exec.h"
#include "sim/sim.h"

/* ---- the data root: catalogs, profiles and traces are found relative to it ------------------- */

/* $ODSIM_ROOT, else the current directory when it holds models/catalog, else the directory two
 * levels above the executable (build/<mode>/odsim). */
static char *find_root(void)
{
    const char *env = getenv("ODSIM_ROOT");
    if (env && *env) return strdup(env);
    if (access("models/catalog/gpus.yaml", R_OK) == 0) return strdup(".");
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return strdup(".");
    exe[n] = '\0';
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash) return strdup(".");
        *slash = '\0';
    }
    return strdup(exe[0] ? exe : "/");
}

static char *path_under(const char *root, const char *rel)
{
    if (!rel || rel[0] == '/' || access(rel, R_OK) == 0) return strdup(rel ? rel : "");
    size_t n = strlen(root) + strlen(rel) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", root, rel);
    return p;
}

char *study_path(const study_t *s, const char *rel) { return path_under(s->root, rel); }

char *study_data_path(const char *rel)
{
    char *root = find_root();
    char *p = root ? path_under(root, rel) : NULL;
    free(root);
    return p;
}

/* ---- opening: overrides, sweep axes, every point checked ----------------------------------- */

static int collect_axes(study_t *s, err_t *e)
{
    const cfg_node_t *sw = cfg_get(cfg_root(s->doc), "sweep");
    s->n_points = 1;
    if (!sw) return ERR_OK;
    if (cfg_kind(sw) != CFG_MAP) return cfg_error(e, ERR_INVAL, sw, "expected a map of key: [values]");
    s->n_axes = cfg_size(sw);
    s->axes = calloc(s->n_axes ? s->n_axes : 1, sizeof *s->axes);
    if (!s->axes) return err_set(e, ERR_NOMEM, "out of memory");
    for (size_t a = 0; a < s->n_axes; a++) {
        const cfg_node_t *vals = cfg_at(sw, a);
        if (cfg_kind(vals) != CFG_SEQ || cfg_size(vals) == 0)
            return cfg_error(e, ERR_INVAL, vals, "a sweep axis needs a non-empty list of values");
        if (!strcmp(cfg_key_at(sw, a), "sweep") || !strncmp(cfg_key_at(sw, a), "sweep.", 6))
            return cfg_error(e, ERR_INVAL, vals, "a sweep cannot sweep itself");
        if (!strcmp(cfg_key_at(sw, a), "catalog"))
            return cfg_error(e, ERR_INVAL, vals, "the catalog directory is one per study: it cannot be swept");
        s->axes[a] = (study_axis_t){cfg_key_at(sw, a), vals, cfg_size(vals)};
        if (s->n_points > 1000000 / s->axes[a].n)
            return cfg_error(e, ERR_RANGE, vals, "the sweep has over a million points");
        s->n_points *= s->axes[a].n;
    }
    return ERR_OK;
}

/* Index of axis a's value at point i (the last axis varies fastest). */
static size_t axis_index(const study_t *s, size_t i, size_t a)
{
    for (size_t b = s->n_axes; b-- > a + 1;) i /= s->axes[b].n;
    return i % s->axes[a].n;
}

/* A short text for a swept value: the scalar, or a map's scalars as k=v joined by commas. */
static void value_brief(const cfg_node_t *v, char *buf, size_t n)
{
    if (cfg_str(v)) {
        snprintf(buf, n, "%s", cfg_str(v));
        return;
    }
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < cfg_size(v) && len < n; i++) {
        const cfg_node_t *c = cfg_at(v, i);
        const char *key = cfg_key_at(v, i);
        if (key && (!strcmp(key, "name") || !strcmp(key, "method"))) key = NULL; /* the value names itself */
        len += (size_t)snprintf(buf + len, n - len, "%s%s%s%s", i ? "," : "", key ? key : "", key ? "=" : "",
                                cfg_str(c) ? cfg_str(c) : "...");
    }
}

static int make_labels(study_t *s, err_t *e)
{
    s->labels = calloc(s->n_points, sizeof *s->labels);
    if (!s->labels) return err_set(e, ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < s->n_points; i++) {
        char buf[1024] = "";
        size_t len = 0;
        for (size_t a = 0; a < s->n_axes; a++) {
            char txt[256];
            value_brief(cfg_at(s->axes[a].values, axis_index(s, i, a)), txt, sizeof txt);
            len += (size_t)snprintf(buf + len, len < sizeof buf ? sizeof buf - len : 0, "%s%s=%s", a ? " " : "", s->axes[a].path, txt);
            if (len >= sizeof buf) len = sizeof buf - 1;
        }
        if (!(s->labels[i] = strdup(s->n_axes ? buf : "base"))) return err_set(e, ERR_NOMEM, "out of memory");
    }
    return ERR_OK;
}

/* The document of point i: the scenario with each axis set to its value (caller frees). */
int study_point_doc(const study_t *s, size_t i, cfg_doc_t **out, err_t *e)
{
    int rc = cfg_clone(s->doc, out, e);
    for (size_t a = 0; !rc && a < s->n_axes; a++)
        rc = cfg_set_node(*out, s->axes[a].path, cfg_at(s->axes[a].values, axis_index(s, i, a)), e);
    if (rc) {
        cfg_free(*out);
        *out = NULL;
    }
    return rc;
}

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
    s->root = find_root();
    int rc = (s->name && s->root) ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
    if (!rc) rc = collect_axes(s, e);
    if (!rc) rc = make_labels(s, e);
    if (!rc) rc = study_catalogs_load(s, e);
    /* Resolve every point now, so a bad value anywhere fails before anything runs. */
    for (size_t i = 0; !rc && i < s->n_points; i++) {
        study_point_t pt;
        rc = study_point_resolve(s, i, &pt, e);
        if (!rc) study_point_free(&pt);
        else if (s->n_points > 1) err_prefix(e, "sweep point %zu (%s)", i, s->labels[i]);
    }
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
    int rc = cfg_parse_file(path, &doc, e);
    if (rc) return rc;
    for (size_t i = 0; !rc && i < n_sets; i++) rc = cfg_set(doc, sets[i], "--set", e);
    if (rc) {
        cfg_free(doc);
        return rc;
    }
    return study_open_doc(doc, path, out, e);
}

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

size_t study_n_points(const study_t *s) { return s->n_points; }
const char *study_point_label(const study_t *s, size_t i) { return i < s->n_points ? s->labels[i] : "?"; }

void study_point_emit(const study_t *s, size_t i, FILE *fp)
{
    cfg_doc_t *d;
    err_t e;
    if (study_point_doc(s, i, &d, &e)) {
        fprintf(fp, "# (cannot emit: %s)\n", e.msg);
        return;
    }
    cfg_emit(cfg_root(d), fp, 0);
    cfg_free(d);
}

void study_provenance(const study_t *s, size_t i, FILE *fp, const char *comment)
{
    fprintf(fp, "%s odsim %s (%s)\n%s scenario: %s, point %zu: %s\n", comment, ODSIM_VERSION, odsim_git_rev, comment,
            s->name, i, study_point_label(s, i));
    fprintf(fp, "%s calibration hash: %016llx\n%s resolved scenario:\n", comment, (unsigned long long)s->calib_hash,
            comment);
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) return;
    study_point_emit(s, i, mem);
    fclose(mem);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) fprintf(fp, "%s   %s\n", comment, line);
    free(buf);
}

/* ---- replications and their aggregate ------------------------------------------------------ */

/* Mean and 95% Student-t interval of x[0..n); every metric here is non-negative, so is the bound. */
static study_stat_t stat_of(const double *x, size_t n)
{
    study_stat_t st = {0, 0, 0};
    if (!n) return st;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += x[i];
    st.mean = sum / (double)n;
    st.lo = st.hi = st.mean;
    if (n < 2) return st;
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (x[i] - st.mean) * (x[i] - st.mean);
    double half = gsl_cdf_tdist_Pinv(0.975, (double)(n - 1)) * sqrt(ss / (double)(n - 1) / (double)n);
    st.lo = st.mean - half > 0 ? st.mean - half : 0;
    st.hi = st.mean + half;
    return st;
}

enum { M_STEP50, M_STEP95, M_STEP99, M_STEPMEAN, M_TTFT50, M_TTFT95, M_TTFT99, M_TPS_SESS, M_TPS_TOTAL, M_SLO, M_COUNT };

static void fill_metrics(const study_rep_t *rep, double *m)
{
    const exec_stats_t *st = rep->stats;
    double span = rep->measured_s > 0 ? rep->measured_s : 1;
    m[M_STEP50] = hist_quantile(st->step_s, 0.50);
    m[M_STEP95] = hist_quantile(st->step_s, 0.95);
    m[M_STEP99] = hist_quantile(st->step_s, 0.99);
    m[M_STEPMEAN] = hist_mean(st->step_s);
    m[M_TTFT50] = hist_quantile(st->ttft_s, 0.50);
    m[M_TTFT95] = hist_quantile(st->ttft_s, 0.95);
    m[M_TTFT99] = hist_quantile(st->ttft_s, 0.99);
    m[M_TPS_SESS] = hist_mean(st->session_tps);
    m[M_TPS_TOTAL] = (double)rep->measured_tokens / span;
    /* Turns still running count once their outcome is decided (a missed first token, a slow rate). */
    double judged = (double)(st->turns_done + st->open_slo_ok + st->open_slo_missed);
    m[M_SLO] = judged > 0 ? (double)(st->turns_slo_ok + st->open_slo_ok) / judged : 0;
}

/* Met when enough judged turns meet it and the box's p99 step is within bound; a run that judged no
 * turn has shown nothing, which is not meeting it. */
static bool rep_meets_slo(const study_rep_t *rep, const scn_slo_t *slo, const double *m)
{
    const exec_stats_t *st = rep->stats;
    if (!(st->turns_done + st->open_slo_ok + st->open_slo_missed) || m[M_SLO] < slo->attainment) return false;
    return slo->step_p99_s <= 0 || m[M_STEP99] <= slo->step_p99_s;
}

int study_run(study_t *s, size_t i, const study_opts_t *opts, study_result_t **out, err_t *e)
{
    *out = NULL;
    if (i >= s->n_points) return err_set(e, ERR_INVAL, "study: point %zu of %zu", i, s->n_points);
    study_point_t pt;
    int rc = study_point_resolve(s, i, &pt, e);
    if (rc) return rc;
    uint32_t reps = opts && opts->replications > 0 ? (uint32_t)opts->replications : (uint32_t)pt.run.replications;
    study_result_t *r = calloc(1, sizeof *r);
    double *m = calloc((size_t)reps * M_COUNT, sizeof *m);
    uint32_t met = 0;
    if (!r || !m) rc = err_set(e, ERR_NOMEM, "out of memory");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint32_t k = 0; !rc && k < reps; k++) {
        study_rep_t rep;
        rc = study_rep_run(s, &pt, k, reps, opts, &rep, e);
        if (rc) break;
        fill_metrics(&rep, m + (size_t)k * M_COUNT);
        r->events += sim_events(rep.sim);
        met += rep_meets_slo(&rep, &pt.slo, m + (size_t)k * M_COUNT);
        if (k == 0) rc = study_result_fill(s, &pt, &rep, r, e);
        study_rep_free(&rep);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (r) r->wall_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (!rc) {
        double col[1000];
        study_stat_t *dst[M_COUNT] = {&r->step_p50_s, &r->step_p95_s, &r->step_p99_s, &r->step_mean_s, &r->ttft_p50_s,
                                      &r->ttft_p95_s, &r->ttft_p99_s, &r->tps_session_mean, &r->tps_total,
                                      &r->slo_attainment};
        for (int j = 0; j < M_COUNT; j++) {
            for (uint32_t k = 0; k < reps; k++) col[k] = m[(size_t)k * M_COUNT + (size_t)j];
            *dst[j] = stat_of(col, reps);
        }
        r->replications = reps;
        r->slo_met = (double)met >= 0.95 * (double)reps;
        r->label = strdup(s->labels[i]);
        if (!r->label) rc = err_set(e, ERR_NOMEM, "out of memory");
    }
    free(m);
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
    free(r->res);
    free(r->lost);
    free(r->label);
    free(r->binding);
    free(r->flags);
    free(r->ctx_tokens);
    free(r->ctx_step_s);
    free(r->util_t_s);
    free(r->util);
    free(r);
}
