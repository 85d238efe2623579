#include "models/quality.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/cfg.h"
#include "models/method_ops.h"

struct quality {
    cfg_doc_t *doc;          /* owns the strings the points point into */
    const cfg_node_t *metrics, *methods;
    quality_point_t *p;
    size_t n;
};

typedef struct qbind {
    const char *method, *metric, *claim, *origin, *model, *context, *task, *budget_note;
    double value, budget, k, kf, page, ctx;
    bool approx;
} qbind_t;

#define Q_(key, type, field, dflt, doc) {key, type, offsetof(qbind_t, field), dflt, 1, 0, NULL, doc}
static const cfg_param_t qparams[] = {
    Q_("method", CFG_T_STRING, method, NULL, "method name"),
    Q_("metric", CFG_T_STRING, metric, "", "what value measures: a name the table's metrics declare"),
    Q_("value", CFG_T_DOUBLE, value, "-1e300", "the published number"),
    Q_("claim", CFG_T_STRING, claim, "", "a qualitative statement, when the source gives no number"),
    Q_("approx", CFG_T_BOOL, approx, "false", "quoted from text, not read off a table"),
    Q_("budget_bits", CFG_T_DOUBLE, budget, "-1e300", "index bits per token per KV head"),
    Q_("budget_note", CFG_T_STRING, budget_note, "", "how the source states its budget"),
    Q_("k", CFG_T_DOUBLE, k, "-1e300", "selected tokens"),
    Q_("k_fraction", CFG_T_DOUBLE, kf, "-1e300", "selected fraction of the context"),
    Q_("page", CFG_T_DOUBLE, page, "-1e300", "landmark page tokens"),
    Q_("origin", CFG_T_STRING, origin, NULL, "paper, table or figure"),
    Q_("model", CFG_T_STRING, model, NULL, "model evaluated"),
    Q_("context", CFG_T_STRING, context, NULL, "benchmark or context length"),
    Q_("context_tokens", CFG_T_DOUBLE, ctx, "-1e300", "the context length the figure holds for, tokens"),
    Q_("task", CFG_T_STRING, task, "", "task or task set"),
};
#undef Q_

typedef struct qtop {
    const cfg_node_t *metrics, *methods, *points;
} qtop_t;

static const cfg_param_t qtop_params[] = {
    {"metrics", CFG_T_NODE, offsetof(qtop_t, metrics), NULL, 1, 0, NULL, "per metric: {better, meaning}"},
    {"methods", CFG_T_NODE, offsetof(qtop_t, methods), NULL, 1, 0, NULL, "per method: {note}"},
    {"points", CFG_T_NODE, offsetof(qtop_t, points), NULL, 1, 0, NULL, "list of published points"},
};

typedef struct qmetric {
    int better;
    const char *meaning;
} qmetric_t;
static const char *const better_names[] = {"higher", "lower", NULL};
static const cfg_param_t qmetric_params[] = {
    {"better", CFG_T_ENUM, offsetof(qmetric_t, better), NULL, 1, 0, better_names, "which way is better"},
    {"meaning", CFG_T_STRING, offsetof(qmetric_t, meaning), NULL, 1, 0, NULL, "benchmark, setting and unit"},
};

typedef struct qnote {
    const char *note;
} qnote_t;
static const cfg_param_t qnote_params[] = {
    {"note", CFG_T_STRING, offsetof(qnote_t, note), "", 1, 0, NULL, "what is known"},
};

static int load_doc(quality_t *q, err_t *e)
{
    qtop_t top;
    int rc = cfg_bind(cfg_root(q->doc), qtop_params, 3, &top, e);
    if (rc) return rc;
    q->methods = top.methods;
    q->metrics = top.metrics;
    for (size_t i = 0; top.metrics && i < cfg_size(top.metrics); i++) {
        qmetric_t m;
        if ((rc = cfg_bind(cfg_at(top.metrics, i), qmetric_params, 2, &m, e))) return rc;
    }
    for (size_t i = 0; top.methods && i < cfg_size(top.methods); i++) {
        qnote_t nn;
        if (method_find(cfg_key_at(top.methods, i)) < 0)
            return cfg_error(e, ERR_INVAL, cfg_at(top.methods, i), "unknown method '%s'", cfg_key_at(top.methods, i));
        if ((rc = cfg_bind(cfg_at(top.methods, i), qnote_params, 1, &nn, e))) return rc;
    }
    if (!top.points) return ERR_OK;
    if (cfg_kind(top.points) != CFG_SEQ) return cfg_error(e, ERR_INVAL, top.points, "expected a list of points");
    q->p = calloc(cfg_size(top.points) + 1, sizeof *q->p);
    if (!q->p) return err_set(e, ERR_NOMEM, "quality: out of memory");
    for (size_t i = 0; i < cfg_size(top.points); i++) {
        const cfg_node_t *pn = cfg_at(top.points, i);
        qbind_t b;
        if ((rc = cfg_bind(pn, qparams, sizeof qparams / sizeof qparams[0], &b, e))) return rc;
        double *absent[6] = {&b.value, &b.budget, &b.k, &b.kf, &b.page, &b.ctx}; /* -1e300: "not given" */
        for (int j = 0; j < 6; j++)
            if (*absent[j] <= -1e299) *absent[j] = NAN;
        if (method_find(b.method) < 0)
            return cfg_error(e, ERR_INVAL, cfg_get(pn, "method"), "unknown method '%s'", b.method);
        if (isnan(b.value) == !*b.claim)
            return cfg_error(e, ERR_INVAL, pn, "a point has either a value (with its metric) or a claim");
        if (!isnan(b.value) && !*b.metric) return cfg_error(e, ERR_INVAL, pn, "missing required key 'metric'");
        if (*b.metric && !quality_metric(q, b.metric, NULL)) {
            char known[1024];
            quality_metric_names(q, known, sizeof known);
            return cfg_error(e, ERR_INVAL, cfg_get(pn, "metric"), "unknown metric '%s' (declared: %s)", b.metric, known);
        }
        q->p[q->n++] = (quality_point_t){b.method, b.metric, b.claim, b.model, b.context, b.task, b.budget_note,
                                         b.origin, "published", b.value, b.budget, b.k, b.kf, b.page, b.ctx, b.approx};
    }
    return ERR_OK;
}

int quality_load_string(const char *name, const char *text, quality_t **out, err_t *e)
{
    quality_t *q = calloc(1, sizeof *q);
    if (!q) return err_set(e, ERR_NOMEM, "quality: out of memory");
    int rc = cfg_parse_string(name, text, strlen(text), &q->doc, e);
    if (!rc) rc = load_doc(q, e);
    if (rc) {
        quality_free(q);
        return rc;
    }
    *out = q;
    return ERR_OK;
}

int quality_load(const char *path, quality_t **out, err_t *e)
{
    quality_t *q = calloc(1, sizeof *q);
    if (!q) return err_set(e, ERR_NOMEM, "quality: out of memory");
    int rc = cfg_parse_file(path, &q->doc, e);
    if (!rc) rc = load_doc(q, e);
    if (rc) {
        quality_free(q);
        return rc;
    }
    *out = q;
    return ERR_OK;
}

void quality_free(quality_t *q)
{
    if (!q) return;
    cfg_free(q->doc);
    free(q->p);
    free(q);
}

bool quality_metric(const quality_t *q, const char *metric, bool *higher_better)
{
    const cfg_node_t *m = q->metrics ? cfg_get(q->metrics, metric) : NULL;
    if (!m) return false;
    const char *b = cfg_str(cfg_get(m, "better"));
    if (higher_better) *higher_better = !b || strcmp(b, "lower");
    return true;
}

void quality_metric_names(const quality_t *q, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; q->metrics && i < cfg_size(q->metrics) && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "", cfg_key_at(q->metrics, i));
}

const char *quality_note(const quality_t *q, const char *method)
{
    const cfg_node_t *m = q->methods ? cfg_get(q->methods, method) : NULL;
    const char *s = m ? cfg_str(cfg_get(m, "note")) : NULL;
    return s ? s : "";
}

/* A point matches an asked value when it gives the same one, or gives none (its source states no k). */
static bool match(double want, double have) { return isnan(want) || isnan(have) || fabs(want - have) < 1e-9; }

int quality_lookup(const quality_t *q, const char *method, const char *metric, double budget_bits, double k,
                   const quality_point_t **out, size_t max, size_t *n, err_t *e)
{
    size_t claims = 0;
    *n = 0;
    for (size_t i = 0; i < q->n; i++) {
        const quality_point_t *p = &q->p[i];
        if (strcmp(p->method, method)) continue;
        if (isnan(p->value)) {
            claims++;
            continue;
        }
        if (metric && strcmp(p->metric, metric)) continue;
        if (!match(budget_bits, p->budget_bits) || !match(k, p->k)) continue;
        if (!isnan(k) && isnan(p->k) && !isnan(p->k_fraction)) continue;   /* a share of another context */
        if (*n < max) out[*n] = p;
        (*n)++;
    }
    if (*n) return ERR_OK;
    char b[32] = "any budget", k_s[32] = "any k";
    if (!isnan(budget_bits)) snprintf(b, sizeof b, "budget %g bits", budget_bits);
    if (!isnan(k)) snprintf(k_s, sizeof k_s, "k %g", k);
    return err_set(e, ERR_NOTFOUND, "no data: no published %s point for %s at %s, %s (%zu qualitative claim(s) only). %s",
                   metric ? metric : "quality", method, b, k_s, claims, quality_note(q, method));
}

const quality_point_t *quality_at(const quality_t *q, size_t i) { return i < q->n ? &q->p[i] : NULL; }
