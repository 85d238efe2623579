/* odsim advise SCENARIO --quality METRIC>=X — methods ranked by cost at equal quality: for every
 * method, the cheapest budget, k, layout and index placement whose quality figure (published, with
 * its origin: models/catalog/quality.yaml) meets the target and whose simulation meets the
 * scenario's SLO; the meeting methods ranked by step time, the rest listed as not comparable with the
 * reason. Nothing is interpolated. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "cli/qest.h"
#include "cli/report.h"
#include "common/cfg.h"
#include "cli/study.h"
#include "models/method_ops.h"
#include "models/quality.h"

static int advise_main(int argc, char **argv);

const cmd_t cmd_advise = {
    "advise", "methods ranked by cost at equal quality, each at its cheapest setting meeting the SLO",
    "usage: odsim advise SCENARIO.yaml --quality METRIC>=X|METRIC<=X [--set KEY=VALUE]... [--replications R]\n"
    "                    [--context TOKENS] [--keys DIR | --published-only] [--json]\n"
    "  For each method, the quality figures of METRIC (models/catalog/quality.yaml: published, each with\n"
    "  its origin) that meet the target give candidate budgets and k; each candidate is simulated with\n"
    "  the index on the host and in HBM, K/V interleaved and apart, cheapest first (fewest index bits,\n"
    "  then smallest k, host before HBM); the first that meets the scenario's SLO in >= 95% of\n"
    "  replications is the method's answer. Methods are ranked by step p50; a method without a figure\n"
    "  reaching the target, or whose figure odsim cannot run (a budget the model fixes otherwise), is\n"
    "  listed as not comparable with the reason. A figure given as a share of the context uses\n"
    "  --context (tokens). An answer whose study decodes at contexts far from the figure's says it\n"
    "  extrapolates. --json: one JSON document {target, ranked, no_setting_meets_slo, not_comparable}.\n"
    "  For the metrics odsim estimates (topk_recall, attention_error), odsim's own estimates join the\n"
    "  published figures (source estimated-synthetic: `odsim quality` on synthetic keys of 16384 tokens\n"
    "  at k 512, its assumed key statistics in `odsim params`; with --keys DIR, estimated-dump on a dump\n"
    "  of real keys, as `odsim quality --keys`); --published-only leaves them out.\n"
    "  e.g. odsim advise scenarios/default.yaml --quality agent_step_agreement>=0.6\n",
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

/* Simulates one method setting; *ok when the SLO holds. A setting the scenario cannot run
 * (infeasible, or a method key the model rejects) is no candidate: *why gets the reason. */
static int try_config(const char *path, const char *const *sets, size_t n_sets, const char *method_yaml, int reps,
                      bool *ok, study_result_t **out, err_t *why, err_t *e)
{
    /* the scenario's sweep, if any, would override the method: the setting is the one point */
    const char **all = malloc((n_sets + 2) * sizeof *all);
    if (!all) return err_set(e, ERR_NOMEM, "out of memory");
    memcpy(all, sets, n_sets * sizeof *all);
    all[n_sets] = "sweep={}";
    all[n_sets + 1] = method_yaml;
    study_t *s;
    int rc = study_open(path, all, n_sets + 2, &s, e);
    free(all);
    study_opts_t o = {.replications = reps};
    if (!rc) rc = study_run(s, 0, &o, out, e);
    study_free(s);
    *ok = false;
    if (rc == ERR_INFEASIBLE || rc == ERR_INVAL) {
        err_set(why, rc, "%s", e->msg);
        *out = NULL;
        return ERR_OK;
    }
    *ok = !rc && (*out)->slo_met;
    return rc;
}

typedef enum { ADV_MET, ADV_NOT_MET, ADV_NOT_COMPARABLE } adv_status_t;

typedef struct advice {
    const char *method;
    adv_status_t status;
    char config[256];
    char reason[512];
    const quality_point_t *pt;
    study_result_t *r;
    double context_tokens;   /* median decode context of the study (NAN: none) */
} advice_t;

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_context(const study_result_t *r)
{
    if (!r || !r->n_ctx) return NAN;
    double *c = malloc(r->n_ctx * sizeof *c);
    if (!c) return NAN;
    memcpy(c, r->ctx_tokens, r->n_ctx * sizeof *c);
    qsort(c, r->n_ctx, sizeof *c, cmp_dbl);
    double m = c[r->n_ctx / 2];
    free(c);
    return m;
}

/* The method's answer from its points meeting the target (cheapest first). */
static int advise_method(const char *path, const char *const *sets, size_t n_sets, int reps, double context,
                         const method_ops_t *ops, const quality_point_t *const *pts, size_t n, advice_t *out, err_t *e)
{
    static const char *const places[] = {"host", "hbm"}, *const layouts[] = {"interleaved", "split"};
    out->status = ADV_NOT_MET;
    snprintf(out->reason, sizeof out->reason, "no setting of its %zu qualifying figure(s) meets the SLO", n);
    bool ran = false;
    for (size_t i = 0; i < n; i++) {
        const quality_point_t *p = pts[i];
        if (isnan(p->k) && !isnan(p->k_fraction) && !(context > 0)) {
            snprintf(out->reason, sizeof out->reason, "its figure selects %g of the context: give --context", p->k_fraction);
            out->status = ADV_NOT_COMPARABLE;
            continue;
        }
        double k = !isnan(p->k) ? p->k : !isnan(p->k_fraction) ? floor(p->k_fraction * context) : NAN;
        for (int pl = 0; pl < 2; pl++) {
            for (int ly = 0; ly < (ops->pages ? 1 : 2); ly++) {   /* a page method's layout is its pages */
                char m[256];
                int len = snprintf(m, sizeof m, "method={method: %s, placement: %s", ops->name, places[pl]);
                if (!isnan(k)) len += snprintf(m + len, sizeof m - (size_t)len, ", k: %.0f", k);
                if (!isnan(p->budget_bits)) len += snprintf(m + len, sizeof m - (size_t)len, ", budget: %g", p->budget_bits);
                if (!isnan(p->page)) len += snprintf(m + len, sizeof m - (size_t)len, ", page: %g", p->page);
                if (!ops->pages) len += snprintf(m + len, sizeof m - (size_t)len, ", layout: %s", layouts[ly]);
                snprintf(m + len, sizeof m - (size_t)len, "}");
                bool ok = false;
                study_result_t *r = NULL;
                err_t why = {0};
                int rc = try_config(path, sets, n_sets, m, reps, &ok, &r, &why, e);
                if (rc) return rc;
                if (!r) {   /* the figure's setting cannot run here: say why, once */
                    if (!ran) {
                        out->status = ADV_NOT_COMPARABLE;
                        snprintf(out->reason, sizeof out->reason, "its figure's setting (%s) cannot run here: %s", m + 7, why.msg);
                    }
                    continue;
                }
                ran = true;
                out->status = ADV_NOT_MET;
                snprintf(out->reason, sizeof out->reason, "no setting of its %zu qualifying figure(s) meets the SLO", n);
                if (ok) {
                    snprintf(out->config, sizeof out->config, "%s", m + 7);
                    out->status = ADV_MET;
                    out->pt = p;
                    out->r = r;
                    out->context_tokens = median_context(r);
                    return ERR_OK;
                }
                study_result_free(r);
            }
        }
    }
    return ERR_OK;
}


/* ---- odsim's own estimates as candidate figures ----------------------------------------------- */

#define EST_TOKENS 16384   /* synthetic context: the estimator's cost grows with it (n·d per step) */
#define EST_K 512          /* the default scenario's k: the advised settings run at it */

typedef struct estimates {
    qest_row_t rows[QEST_MAX_ROWS];
    size_t n;
    quality_point_t pts[QEST_MAX_ROWS];
    size_t n_pts;
    char origin[256], context[64];
} estimates_t;

/* The metrics the estimator measures, and the row statistic each reads. */
static const qest_stat_t *est_stat(const qest_row_t *r, const char *metric)
{
    return !strcmp(metric, "topk_recall") ? &r->recall : !strcmp(metric, "attention_error") ? &r->attn_error : NULL;
}

/* Estimates every registered method's selection over a grid of budgets (pages for landmark) on the
 * synthetic keys or the dump in keys_dir, as quality points of `metric`. */
static int estimate(const char *metric, const char *keys_dir, estimates_t *es, err_t *e)
{
    static const char *const specs[] = {"pertoken:34,51,68,102,136,204,272", "sparq:34,51,68,102,136,204,272", /* whole channels (4.25 bits) */
                                        "fathom:34,46,56,68,92,136,192,272", "landmark:8,16,32,64"};
    es->n = es->n_pts = 0;
    int rc = 0;
    for (size_t i = 0; !rc && i < sizeof specs / sizeof *specs; i++) rc = qest_add_rows(specs[i], es->rows, &es->n, e);
    kvsynth_params_t p;
    kvdump_t dump;
    qest_source_t src = {0};
    cfg_doc_t *doc = NULL;
    if (!rc && keys_dir) {
        rc = kvdump_open(keys_dir, &dump, e);
        src = (qest_source_t){NULL, &dump, rc ? 0 : dump.n_entries};
    } else if (!rc) {
        char set[64];
        snprintf(set, sizeof set, "{tokens: %d, layers: 2, kv_heads: 2, steps: 4}", EST_TOKENS);
        rc = cfg_parse_string("advise estimate", set, strlen(set), &doc, e);
        if (!rc) rc = kvsynth_bind(cfg_root(doc), &p, e);
        cfg_free(doc);
        src = (qest_source_t){&p, NULL, (size_t)(p.layers * p.kv_heads)};
    }
    qest_opts_t o = {.k = EST_K, .sparsity = 16, .seed = 1};
    qest_summary_t sm;
    if (!rc) rc = qest_run(&src, &o, es->rows, es->n, &sm, e);
    if (keys_dir && src.dump) kvdump_close(&dump);
    if (rc) return rc;
    if (keys_dir)
        snprintf(es->origin, sizeof es->origin, "odsim quality --keys %s --k %d (%zu steps)", keys_dir, EST_K, sm.steps);
    else
        snprintf(es->origin, sizeof es->origin,
                 "odsim quality on synthetic keys (assumed key statistics, odsim params quality): %d tokens, k %d, %zu steps",
                 EST_TOKENS, EST_K, sm.steps);
    snprintf(es->context, sizeof es->context, "%zu tokens", sm.n_max);
    for (size_t i = 0; i < es->n; i++) {
        const qest_row_t *r = &es->rows[i];
        const qest_stat_t *st = est_stat(r, metric);
        if (r->kind < 0 || !r->n || !st) continue;
        double mean, se;
        qest_mean_se(r, st, &mean, &se);
        es->pts[es->n_pts++] = (quality_point_t){
            .method = r->method, .metric = metric, .model = keys_dir ? "dump" : "synthetic", .context = es->context,
            .origin = es->origin, .source = keys_dir ? "estimated-dump" : "estimated-synthetic", .value = mean,
            .budget_bits = r->page ? NAN : r->budget_bits, .k = EST_K, .k_fraction = NAN,
            .page = r->page ? r->page : NAN, .context_tokens = (double)sm.n_max, .approx = true};
    }
    return 0;
}

/* Points of `method` meeting the target, fewest index bits then smallest k first; 0 with *why. */
static size_t candidates(const quality_t *q, const estimates_t *es, const char *method, const target_t *t,
                         const quality_point_t **pts, size_t max, err_t *why)
{
    const quality_point_t *all[64 + QEST_MAX_ROWS];
    size_t n = 0, m = 0;
    err_t none = {0};
    if (quality_lookup(q, method, t->metric, NAN, NAN, all, 64, &n, &none)) n = 0;
    double best = NAN;
    for (size_t i = 0; es && i < es->n_pts; i++)
        if (!strcmp(es->pts[i].method, method)) {
            all[n++] = &es->pts[i];
            if (isnan(best) || (t->at_least ? es->pts[i].value > best : es->pts[i].value < best)) best = es->pts[i].value;
        }
    if (!n) {
        *why = none;
        return 0;
    }
    for (size_t i = 0; i < n && m < max; i++)
        if (meets(t, all[i]->value)) pts[m++] = all[i];
    for (size_t i = 1; i < m; i++) /* insertion sort by (budget, k) */
        for (size_t j = i; j > 0; j--) {
            double bj = isnan(pts[j]->budget_bits) ? 0 : pts[j]->budget_bits, bp = isnan(pts[j - 1]->budget_bits) ? 0 : pts[j - 1]->budget_bits;
            if (bj > bp || (bj == bp && !(pts[j]->k < pts[j - 1]->k))) break;
            const quality_point_t *x = pts[j];
            pts[j] = pts[j - 1];
            pts[j - 1] = x;
        }
    if (!m && isnan(best))
        err_set(why, ERR_NOTFOUND, "no %s figure of %s reaches %s %g (%zu below it)", t->metric, method,
                t->at_least ? ">=" : "<=", t->value, n);
    else if (!m)
        err_set(why, ERR_NOTFOUND, "no %s figure of %s reaches %s %g (%zu below it; odsim's estimate is at best %.3g, on %s)",
                t->metric, method, t->at_least ? ">=" : "<=", t->value, n, best, es->context);
    return m;
}

/* "" or the line saying the figure holds at another context than the study decodes at. */
static void extrapolation(const advice_t *a, char *buf, size_t n)
{
    buf[0] = '\0';
    double fc = a->pt ? a->pt->context_tokens : NAN;
    if (isnan(fc) || isnan(a->context_tokens)) {
        if (a->pt && isnan(fc) && strcmp(a->pt->context, "any"))
            snprintf(buf, n, "the figure holds for %s, not one context length: its context is not compared", a->pt->context);
        return;
    }
    double r = a->context_tokens / fc;
    if (r > 2 || r < 0.5)
        snprintf(buf, n, "extrapolates: the figure holds at %.0f tokens, the study decodes at about %.0f (%.3gx)", fc,
                 a->context_tokens, r);
}

static json_t *advice_json(const advice_t *a)
{
    char ex[256];
    extrapolation(a, ex, sizeof ex);
    const quality_point_t *p = a->pt;
    json_t *q = json_pack("{s:s,s:f,s:s,s:s,s:s,s:s,s:o,s:b}", "metric", p->metric, "value", p->value, "source", p->source,
                          "origin", p->origin, "model", p->model, "context", p->context, "context_tokens",
                          report_num(p->context_tokens), "approx", p->approx);
    return json_pack("{s:s,s:s,s:f,s:f,s:f,s:o,s:o,s:s?}", "method", a->method, "setting", a->config, "step_p50_ms",
                     a->r->step_p50_s.mean * 1e3, "step_p99_ms", a->r->step_p99_s.mean * 1e3, "tokens_per_s_session",
                     a->r->tps_session_mean.mean, "study_context_tokens", report_num(a->context_tokens), "quality", q,
                     "extrapolates", *ex ? ex : NULL);
}

static int by_step(const void *x, const void *y)
{
    const advice_t *a = *(const advice_t *const *)x, *b = *(const advice_t *const *)y;
    double u = a->r->step_p50_s.mean, v = b->r->step_p50_s.mean;
    return (u > v) - (u < v) ? (u > v) - (u < v) : strcmp(a->method, b->method);
}

static int print_json(const target_t *t, advice_t *adv, int n)
{
    json_t *root = json_object(), *ranked = json_array(), *unmet = json_array(), *nc = json_array();
    advice_t *order[64];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (adv[i].status == ADV_MET) order[m++] = &adv[i];
    qsort(order, (size_t)m, sizeof order[0], by_step);
    for (int i = 0; i < m; i++) json_array_append_new(ranked, advice_json(order[i]));
    for (int i = 0; i < n; i++) {
        if (adv[i].status == ADV_MET) continue;
        json_array_append_new(adv[i].status == ADV_NOT_MET ? unmet : nc,
                              json_pack("{s:s,s:s}", "method", adv[i].method, "reason", adv[i].reason));
    }
    json_object_set_new(root, "target", json_pack("{s:s,s:s,s:f}", "metric", t->metric, "op", t->at_least ? ">=" : "<=",
                                                  "value", t->value));
    json_object_set_new(root, "ranked", ranked);
    json_object_set_new(root, "no_setting_meets_slo", unmet);
    json_object_set_new(root, "not_comparable", nc);
    char *txt = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!txt) return cmd_fail("advise", "out of memory");
    puts(txt);
    free(txt);
    return 0;
}

static void print_text(const char *path, const target_t *t, advice_t *adv, int n)
{
    printf("odsim advise: %s, quality %s %s %g (published figures, models/catalog/quality.yaml, and odsim's estimates\n"
           "  where it makes them; each answer names its figure's source and origin)\n",
           path, t->metric, t->at_least ? ">=" : "<=", t->value);
    advice_t *order[64];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (adv[i].status == ADV_MET) order[m++] = &adv[i];
    qsort(order, (size_t)m, sizeof order[0], by_step);
    printf("\nranked by step p50 at equal quality (%d method(s)):\n", m);
    for (int i = 0; i < m; i++) {
        const advice_t *a = order[i];
        char ex[256];
        extrapolation(a, ex, sizeof ex);
        printf("%d. %-9s %s\n%s%s%s   step p50 %.4g ms, p99 %.4g ms, %.4g tokens/s per session; %s = %g (%s on %s: %s%s)\n",
               i + 1, a->method, a->config, *ex ? "   " : "", ex, *ex ? "\n" : "", a->r->step_p50_s.mean * 1e3,
               a->r->step_p99_s.mean * 1e3, a->r->tps_session_mean.mean, a->pt->metric, a->pt->value, a->pt->source,
               a->pt->model, a->pt->origin, a->pt->approx ? "; approximate" : "");
    }
    for (int pass = 0; pass < 2; pass++) {
        adv_status_t st = pass ? ADV_NOT_COMPARABLE : ADV_NOT_MET;
        bool any = false;
        for (int i = 0; i < n; i++) {
            if (adv[i].status != st) continue;
            if (!any) printf("\n%s:\n", pass ? "not comparable" : "no setting meets the SLO");
            any = true;
            printf("  %-9s %s\n", adv[i].method, adv[i].reason);
        }
    }
}

static int advise_main(int argc, char **argv)
{
    const char *path = NULL, **sets = calloc((size_t)argc, sizeof *sets);
    size_t n_sets = 0;
    target_t t = {.metric = ""};
    long reps = 0;
    double context = 0;
    bool json = false, published_only = false;
    const char *keys = NULL;
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
            if (*end || !(context > 0) || context > 1e12) rc = cmd_usage_error(&cmd_advise, "--context: expected tokens > 0");
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--published-only")) {
            published_only = true;
        } else if (!strcmp(argv[i], "--keys") && i + 1 < argc) {
            keys = argv[++i];
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
    char *qpath = rc ? NULL : study_data_path("models/catalog/quality.yaml");
    if (!rc && !qpath) rc = cmd_fail("advise", "out of memory");
    if (!rc && quality_load(qpath, &q, &e)) rc = cmd_fail("advise", "%s", e.msg);
    free(qpath);
    bool higher;
    if (!rc && !quality_metric(q, t.metric, &higher)) {
        char known[1024];
        quality_metric_names(q, known, sizeof known);
        rc = cmd_usage_error(&cmd_advise, "--quality: unknown metric '%s' (known: %s)", t.metric, known);
    }
    if (!rc && higher != t.at_least)
        rc = cmd_usage_error(&cmd_advise, "--quality: %s is better %s: ask %s%s%g", t.metric, higher ? "higher" : "lower",
                             t.metric, higher ? ">=" : "<=", t.value);
    if (!rc && keys && published_only) rc = cmd_usage_error(&cmd_advise, "--keys gives estimates; --published-only leaves them out");
    static estimates_t es;
    bool estimated = !rc && !published_only && (!strcmp(t.metric, "topk_recall") || !strcmp(t.metric, "attention_error"));
    if (estimated && estimate(t.metric, keys, &es, &e)) rc = cmd_fail("advise", "%s", e.msg);
    if (!rc && keys && !estimated) rc = cmd_usage_error(&cmd_advise, "--keys: odsim estimates topk_recall and attention_error only");
    advice_t adv[64] = {{0}};
    int n = 0;
    for (int mi = 0; !rc && mi < method_count() && n < 64; mi++) {
        const method_ops_t *ops = method_ops_at(mi);
        const quality_point_t *pts[16];
        err_t why = {0};
        advice_t *a = &adv[n++];
        a->method = ops->name;
        size_t np = candidates(q, estimated ? &es : NULL, ops->name, &t, pts, 16, &why);
        if (!np) {
            a->status = ADV_NOT_COMPARABLE;
            snprintf(a->reason, sizeof a->reason, "%s", why.msg);
            continue;
        }
        if (advise_method(path, sets, n_sets, (int)reps, context, ops, pts, np, a, &e))
            rc = cmd_fail("advise", "%s: %s", ops->name, e.msg);
    }
    if (!rc) {
        if (json) rc = print_json(&t, adv, n);
        else print_text(path, &t, adv, n);
    }
    for (int i = 0; i < n; i++) study_result_free(adv[i].r);
    if (estimated) qest_rows_free(es.rows, es.n);
    quality_free(q);
    free(sets);
    return rc;
}
