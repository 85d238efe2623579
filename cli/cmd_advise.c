/* odsim advise SCENARIO --quality METRIC>=X — the budget advisor: for every method, the cheapest
 * budget, k, layout and index placement that meet the scenario's SLO at a target quality taken from
 * the published quality tables (models/catalog/quality.yaml). A method with no published point that
 * reaches the target says so; nothing is interpolated. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "cli/study.h"
#include "models/method_ops.h"
#include "models/quality.h"

static int advise_main(int argc, char **argv);

const cmd_t cmd_advise = {
    "advise", "cheapest budget, k, layout and placement per method meeting the SLO at a target quality",
    "usage: odsim advise SCENARIO.yaml --quality METRIC>=X|METRIC<=X [--set KEY=VALUE]... [--replications R]\n"
    "  For each method, the published quality points (models/catalog/quality.yaml) of METRIC that meet\n"
    "  the target give candidate budgets and k; each candidate is simulated with the index on the host\n"
    "  and in HBM, K/V interleaved and apart, cheapest first (fewest index bits, then smallest k, host\n"
    "  before HBM); the first that meets the scenario's SLO in >= 95% of replications is reported.\n"
    "  A point given as a fraction of the context uses the scenario's context (--context, tokens).\n"
    "  e.g. odsim advise scenarios/default.yaml --quality topk_recall>=0.9\n",
    advise_main};

typedef struct target {
    char metric[64];
    bool at_least;
    double value;
} target_t;

static int parse_target(const char *s, target_t *t)
{
    const char *op = strstr(s, ">=");
    t->at_least = op != NULL;
    if (!op) op = strstr(s, "<=");
    if (!op || op == s || (size_t)(op - s) >= sizeof t->metric) return -1;
    memcpy(t->metric, s, (size_t)(op - s));
    t->metric[op - s] = '\0';
    char *end;
    t->value = strtod(op + 2, &end);
    return (*end || end == op + 2 || !isfinite(t->value)) ? -1 : 0;
}

static bool meets(const target_t *t, double v) { return t->at_least ? v >= t->value : v <= t->value; }

/* Simulates method m with budget b and k at one placement/layout; *ok when the SLO holds. */
static int try_config(const char *path, const char *const *sets, size_t n_sets, const char *method_yaml, int reps,
                      bool *ok, study_result_t **out, err_t *e)
{
    const char **all = malloc((n_sets + 1) * sizeof *all);
    if (!all) return err_set(e, ERR_NOMEM, "out of memory");
    memcpy(all, sets, n_sets * sizeof *all);
    all[n_sets] = method_yaml;
    study_t *s;
    int rc = study_open(path, all, n_sets + 1, &s, e);
    free(all);
    study_opts_t o = {.replications = reps};
    if (!rc) rc = study_run(s, 0, &o, out, e);
    study_free(s);
    if (rc == ERR_INFEASIBLE || rc == ERR_INVAL) { /* this configuration cannot run: not a candidate */
        fprintf(stderr, "advise: skipped %s: %s\n", method_yaml, e->msg);
        *ok = false;
        *out = NULL;
        return ERR_OK;
    }
    *ok = !rc && (*out)->slo_met;
    return rc;
}

typedef struct advice {
    char config[256];
    const quality_point_t *pt;
    study_result_t *r;
} advice_t;

/* Candidates of one method from its points meeting the target, cheapest first. */
static int advise_method(const char *path, const char *const *sets, size_t n_sets, int reps, double context,
                         const method_ops_t *ops, const quality_point_t *const *pts, size_t n, advice_t *out, err_t *e)
{
    static const char *const places[] = {"host", "hbm"}, *const layouts[] = {"interleaved", "split"};
    for (size_t i = 0; i < n; i++) {
        const quality_point_t *p = pts[i];
        double k = !isnan(p->k) ? p->k : !isnan(p->k_fraction) && context > 0 ? floor(p->k_fraction * context) : 2048;
        for (int pl = 0; pl < 2; pl++) {
            for (int ly = 0; ly < 2; ly++) {
                char m[256];
                int len = snprintf(m, sizeof m, "method={method: %s, k: %.0f, placement: %s", ops->name, k, places[pl]);
                if (!isnan(p->budget_bits) && !ops->budget_fixed)   /* else the model gives the budget */
                    len += snprintf(m + len, sizeof m - (size_t)len, ", budget: %g", p->budget_bits);
                if (!ops->pages)   /* a page method's layout is its pages */
                    len += snprintf(m + len, sizeof m - (size_t)len, ", layout: %s", layouts[ly]);
                snprintf(m + len, sizeof m - (size_t)len, "}");
                bool ok = false;
                study_result_t *r = NULL;
                int rc = try_config(path, sets, n_sets, m, reps, &ok, &r, e);
                if (rc) return rc;
                if (ok) {
                    snprintf(out->config, sizeof out->config, "%s", m + 7);
                    out->pt = p;
                    out->r = r;
                    return ERR_OK;
                }
                study_result_free(r);
            }
        }
    }
    return ERR_OK;
}

/* Points of `method` meeting the target, fewest index bits then smallest k first. */
static size_t candidates(const quality_t *q, const char *method, const target_t *t, const quality_point_t **pts,
                         size_t max, err_t *why)
{
    const quality_point_t *all[64];
    size_t n = 0, m = 0;
    if (quality_lookup(q, method, t->metric, NAN, NAN, all, 64, &n, why)) return 0;
    for (size_t i = 0; i < n && i < 64 && m < max; i++)
        if (meets(t, all[i]->value)) pts[m++] = all[i];
    for (size_t i = 1; i < m; i++) /* insertion sort by (budget, k) */
        for (size_t j = i; j > 0; j--) {
            double bj = isnan(pts[j]->budget_bits) ? 0 : pts[j]->budget_bits, bp = isnan(pts[j - 1]->budget_bits) ? 0 : pts[j - 1]->budget_bits;
            if (bj > bp || (bj == bp && !(pts[j]->k < pts[j - 1]->k))) break;
            const quality_point_t *x = pts[j];
            pts[j] = pts[j - 1];
            pts[j - 1] = x;
        }
    if (!m) err_set(why, ERR_NOTFOUND, "no published %s point of %s reaches %s %g", t->metric, method,
                    t->at_least ? ">=" : "<=", t->value);
    return m;
}

static int advise_main(int argc, char **argv)
{
    const char *path = NULL, **sets = calloc((size_t)argc, sizeof *sets);
    size_t n_sets = 0;
    target_t t = {.metric = ""};
    long reps = 0;
    double context = 0;
    if (!sets) return cmd_fail("advise", "out of memory");
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--quality") && i + 1 < argc) {
            if (parse_target(argv[++i], &t)) rc = cmd_usage_error(&cmd_advise, "--quality: expected METRIC>=X or METRIC<=X, got '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
            sets[n_sets++] = argv[++i];
        } else if (!strcmp(argv[i], "--replications") && i + 1 < argc) {
            reps = strtol(argv[++i], &end, 10);
            if (*end || reps < 1 || reps > 1000) rc = cmd_usage_error(&cmd_advise, "--replications: expected 1..1000");
        } else if (!strcmp(argv[i], "--context") && i + 1 < argc) {
            context = strtod(argv[++i], &end);
            if (*end || !(context > 0)) rc = cmd_usage_error(&cmd_advise, "--context: expected tokens > 0");
        } else if (argv[i][0] == '-') {
            rc = cmd_usage_error(&cmd_advise, "unknown option or missing value: '%s'", argv[i]);
        } else if (path) {
            rc = cmd_usage_error(&cmd_advise, "one scenario at a time");
        } else {
            path = argv[i];
        }
    }
    if (!rc && !path) rc = cmd_usage_error(&cmd_advise, "no scenario given");
    if (!rc && !t.metric[0]) rc = cmd_usage_error(&cmd_advise, "--quality is required");
    quality_t *q = NULL;
    err_t e;
    if (!rc && quality_load("models/catalog/quality.yaml", &q, &e)) rc = cmd_fail("advise", "%s", e.msg);
    if (!rc) printf("odsim advise: %s, quality %s %s %g (models/catalog/quality.yaml)\n", path, t.metric,
                    t.at_least ? ">=" : "<=", t.value);
    for (int mi = 0; !rc && mi < method_count(); mi++) {
        const method_ops_t *ops = method_ops_at(mi);
        const quality_point_t *pts[16];
        err_t why = {0};
        size_t n = candidates(q, ops->name, &t, pts, 16, &why);
        advice_t a = {.config = ""};
        if (n && advise_method(path, sets, n_sets, (int)reps, context, ops, pts, n, &a, &e)) {
            rc = cmd_fail("advise", "%s: %s", ops->name, e.msg);
            break;
        }
        printf("\n%-9s ", ops->name);
        if (!n) printf("%s\n", why.msg);
        else if (!a.r) printf("no configuration of its %zu qualifying point(s) meets the SLO\n", n);
        else {
            printf("%s\n          step p99 %.4g ms, %.4g tokens/s per session; quality %s = %g (%s%s)\n", a.config,
                   a.r->step_p99_s.mean * 1e3, a.r->tps_session_mean.mean, a.pt->metric, a.pt->value, a.pt->source,
                   a.pt->approx ? "; approximate" : "");
            study_result_free(a.r);
        }
    }
    quality_free(q);
    free(sets);
    return rc;
}
