/* trust — which held-out validation group covers an answer's regime (validation/trust.h). */
#include "validation/trust.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfg.h"
#include "common/str.h"

struct trust {
    trust_group_t *g;
    size_t n;
};

typedef struct trust_node {
    const char *name, *about, *measures, *model, *box, *calibration, *origin, *note, *command;
    const cfg_node_t *modes, *sessions, *context;
    int64_t cases;
    double median_pct, max_pct;
} trust_node_t;

#define F(k) offsetof(trust_node_t, k)
static const cfg_param_t group_params[] = {
    {"name", CFG_T_STRING, F(name), NULL, 1, 0, NULL, "the group's name in odsim validate's report"},
    {"about", CFG_T_STRING, F(about), NULL, 1, 0, NULL, "what its cases are, in words"},
    {"measures", CFG_T_STRING, F(measures), NULL, 1, 0, NULL, "what one case times"},
    {"modes", CFG_T_NODE, F(modes), NULL, 1, 0, NULL, "serving modes (absent: one session alone)"},
    {"sessions", CFG_T_NODE, F(sessions), NULL, 1, 0, NULL, "[lo, hi] sessions per GPU"},
    {"context", CFG_T_NODE, F(context), NULL, 1, 0, NULL, "[lo, hi] context tokens (absent: none)"},
    {"model", CFG_T_STRING, F(model), "", 1, 0, NULL, "the model measured ('' none)"},
    {"box", CFG_T_STRING, F(box), NULL, 1, 0, NULL, "the measured box (models/catalog/boxes.yaml)"},
    {"calibration", CFG_T_STRING, F(calibration), NULL, 1, 0, NULL, "the profile the figures are of"},
    {"origin", CFG_T_STRING, F(origin), NULL, 1, 0, NULL, "where the regime comes from"},
    {"note", CFG_T_STRING, F(note), "", 1, 0, NULL, "shown with the figures"},
    {"cases", CFG_T_INT, F(cases), NULL, 1, 1e9, NULL, "cases validated"},
    {"median_pct", CFG_T_DOUBLE, F(median_pct), NULL, 0, 1e9, NULL, "median absolute error, %"},
    {"max_pct", CFG_T_DOUBLE, F(max_pct), NULL, 0, 1e9, NULL, "largest absolute error, %"},
    {"command", CFG_T_STRING, F(command), NULL, 1, 0, NULL, "odsim's arguments reproducing the figures"},
};
#undef F

static void group_free(trust_group_t *g)
{
    char **s[] = {&g->name, &g->about, &g->measures, &g->model, &g->box, &g->calibration, &g->origin, &g->note, &g->command};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) free(*s[i]);
    for (size_t i = 0; i < g->n_modes; i++) free(g->modes[i]);
    free(g->modes);
}

void trust_free(trust_t *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) group_free(&t->g[i]);
    free(t->g);
    free(t);
}

/* [lo, hi] of a two-number list into lo, hi (n absent: NAN, when allowed). */
static int range_of(const cfg_node_t *n, const cfg_node_t *at, const char *key, bool optional, double *lo, double *hi, err_t *e)
{
    *lo = *hi = NAN;
    if (!n) return optional ? ERR_OK : cfg_error(e, ERR_INVAL, at, "missing key '%s'", key);
    if (cfg_kind(n) != CFG_SEQ || cfg_size(n) != 2) return cfg_error(e, ERR_INVAL, n, "%s: expected [lo, hi]", key);
    int rc = cfg_double(cfg_at(n, 0), lo, e);
    if (!rc) rc = cfg_double(cfg_at(n, 1), hi, e);
    if (!rc && !(*lo >= 1 && *lo <= *hi)) rc = cfg_error(e, ERR_INVAL, n, "%s: expected 1 <= lo <= hi", key);
    return rc;
}

static int group_load(const cfg_node_t *m, trust_group_t *g, err_t *e)
{
    trust_node_t tn;
    int rc = cfg_bind(m, group_params, sizeof group_params / sizeof group_params[0], &tn, e);
    if (!rc) rc = range_of(tn.sessions, m, "sessions", false, &g->sessions_lo, &g->sessions_hi, e);
    if (!rc) rc = range_of(tn.context, m, "context", true, &g->context_lo, &g->context_hi, e);
    if (!rc && tn.modes && cfg_kind(tn.modes) != CFG_SEQ) rc = cfg_error(e, ERR_INVAL, tn.modes, "modes: expected a list");
    if (rc) return rc;
    g->cases = (long)tn.cases;
    g->median_pct = tn.median_pct;
    g->max_pct = tn.max_pct;
    const char *src[] = {tn.name, tn.about, tn.measures, tn.model, tn.box, tn.calibration, tn.origin, tn.note, tn.command};
    char **dst[] = {&g->name, &g->about, &g->measures, &g->model, &g->box, &g->calibration, &g->origin, &g->note, &g->command};
    for (size_t i = 0; i < sizeof src / sizeof src[0]; i++)
        if (!(*dst[i] = str_dup(src[i]))) return err_set(e, ERR_NOMEM, "out of memory");
    g->n_modes = tn.modes ? cfg_size(tn.modes) : 0;
    if (g->n_modes && !(g->modes = calloc(g->n_modes, sizeof *g->modes))) return err_set(e, ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < g->n_modes; i++) {
        const char *s = cfg_str(cfg_at(tn.modes, i));
        if (!s) return cfg_error(e, ERR_INVAL, cfg_at(tn.modes, i), "modes: expected a serving mode's name");
        if (!(g->modes[i] = str_dup(s))) return err_set(e, ERR_NOMEM, "out of memory");
    }
    return ERR_OK;
}

int trust_load(const char *path, trust_t **out, err_t *e)
{
    *out = NULL;
    cfg_doc_t *doc = NULL;
    int rc = cfg_parse_file(path, &doc, e);
    if (rc) return rc;
    const cfg_node_t *root = cfg_root(doc), *seq = cfg_get(root, "groups");
    trust_t *t = calloc(1, sizeof *t);
    if (!t) rc = err_set(e, ERR_NOMEM, "out of memory");
    else if (!seq || cfg_kind(seq) != CFG_SEQ || !cfg_size(seq))
        rc = cfg_error(e, ERR_INVAL, seq ? seq : root, "expected `groups:`, a list of groups");
    else if (!(t->g = calloc(cfg_size(seq), sizeof *t->g))) rc = err_set(e, ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < cfg_size(seq); i++, t->n++) rc = group_load(cfg_at(seq, i), &t->g[i], e);
    if (!rc) rc = cfg_check_consumed(root, e);
    cfg_free(doc);
    if (rc) trust_free(t);
    else *out = t;
    return rc;
}

size_t trust_n_groups(const trust_t *t) { return t->n; }
const trust_group_t *trust_group_at(const trust_t *t, size_t i) { return i < t->n ? &t->g[i] : NULL; }

void trust_tokens(char *buf, size_t n, double tokens)
{
    uint64_t v = (uint64_t)tokens;
    if (v >= 1048576 && v % 1048576 == 0) snprintf(buf, n, "%lluMi", (unsigned long long)(v / 1048576));
    else if (v >= 1024 && v % 1024 == 0) snprintf(buf, n, "%lluKi", (unsigned long long)(v / 1024));
    else snprintf(buf, n, "%llu", (unsigned long long)v);
}

static void span(char *buf, size_t n, double lo, double hi)
{
    char a[32], b[32];
    trust_tokens(a, sizeof a, lo);
    trust_tokens(b, sizeof b, hi);
    if (lo == hi) snprintf(buf, n, "%s", a);
    else snprintf(buf, n, "%s-%s", a, b);
}

/* ---- matching -------------------------------------------------------------------------------- */

typedef struct why_list {
    char **v;
    size_t n;
    bool nomem;
} why_list_t;

static void why_add(why_list_t *l, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **nv = realloc(l->v, (l->n + 1) * sizeof *nv);
    char *s = nv ? str_dup(buf) : NULL;
    if (nv) l->v = nv;
    if (!s) l->nomem = true;
    else l->v[l->n++] = s;
}

static bool has_mode(const trust_group_t *g, const char *mode)
{
    for (size_t i = 0; mode && i < g->n_modes; i++)
        if (!strcmp(g->modes[i], mode)) return true;
    return false;
}

static bool on_platform(const trust_group_t *g, const trust_regime_t *r)
{
    return r->box && !strcmp(r->box, g->box) && !r->what_if;
}

enum { LV_BOX = 1, LV_SHARING = 2, LV_CONTEXT = 4 };

/* The respects in which r leaves g (none: g covers r), one phrase each into l; returns which of
 * box, sharing (mode or sessions) and context they were (LV_*). */
static unsigned leaves(const trust_group_t *g, const trust_regime_t *r, bool same_calib, why_list_t *l)
{
    char a[64], b[64];
    unsigned m = 0;
    if (r->box && strcmp(r->box, g->box)) why_add(l, "box %s is not %s's measured %s", r->box, g->name, g->box), m |= LV_BOX;
    else if (r->what_if)
        why_add(l, "%s: a what-if outside %s's measured platform (%s as it is)", r->what_if, g->name, g->box), m |= LV_BOX;
    if (!same_calib) why_add(l, "profile %s is not the one %s validates (%s)", r->calibration, g->name, g->calibration);
    if (*g->model && (!r->model || strcmp(r->model, g->model)))
        why_add(l, "model %s, not %s's %s", r->model ? r->model : "?", g->name, g->model);
    if (g->n_modes && !has_mode(g, r->mode)) {
        m |= LV_SHARING;
        size_t k = 0;
        for (size_t i = 0; i < g->n_modes && k < sizeof b - 1; i++)
            k += (size_t)snprintf(b + k, sizeof b - k, "%s%s", i ? "/" : "", g->modes[i]);
        why_add(l, "serving mode %s, not %s's %s", r->mode ? r->mode : "?", g->name, b);
    }
    if (isnan(r->sessions)) why_add(l, "sessions per GPU %s", r->sessions_why ? r->sessions_why : "not known"), m |= LV_SHARING;
    else if (r->sessions < g->sessions_lo || r->sessions > g->sessions_hi) {
        why_add(l, "%g session(s) per GPU beyond %s's %g-%g", r->sessions, g->name, g->sessions_lo, g->sessions_hi);
        m |= LV_SHARING;
    }
    if (isnan(g->context_lo)) return m;
    if (isnan(r->context_lo)) why_add(l, "context %s", r->context_why ? r->context_why : "not known"), m |= LV_CONTEXT;
    else if (r->context_lo < g->context_lo || r->context_hi > g->context_hi) {
        span(a, sizeof a, r->context_lo, r->context_hi);
        span(b, sizeof b, g->context_lo, g->context_hi);
        why_add(l, "context %s tokens beyond %s's %s", a, g->name, b);
        m |= LV_CONTEXT;
    }
    return m;
}

static int add_nearest(trust_answer_t *a, const trust_group_t *g, const char *why)
{
    for (size_t i = 0; i < a->n_nearest; i++)
        if (a->nearest[i].g == g) return ERR_OK;
    trust_evidence_t *nv = realloc(a->nearest, (a->n_nearest + 1) * sizeof *nv);
    if (!nv) return ERR_NOMEM;
    a->nearest = nv;
    if (!(nv[a->n_nearest].why = str_dup(why))) return ERR_NOMEM;
    nv[a->n_nearest++].g = g;
    return ERR_OK;
}

/* Groups of other kinds measured along the respects in which r leaves its own kind's groups: its
 * context, its sessions sharing a GPU in its mode, its box. */
static int nearest(const trust_t *t, const trust_regime_t *r, unsigned lv, trust_answer_t *a)
{
    bool ctx_out = lv & LV_CONTEXT, share_out = lv & LV_SHARING, box_out = lv & LV_BOX;
    char buf[128], sp[64];
    int rc = ERR_OK;
    for (size_t i = 0; !rc && ctx_out && !isnan(r->context_lo) && i < t->n; i++) {
        const trust_group_t *g = &t->g[i];
        if (strcmp(g->measures, r->measures) && on_platform(g, r) && !isnan(g->context_lo) && r->context_lo <= g->context_hi &&
            r->context_hi >= g->context_lo) {
            span(sp, sizeof sp, r->context_lo, r->context_hi);
            snprintf(buf, sizeof buf, "context %s tokens", sp);
            rc = add_nearest(a, g, buf);
        }
    }
    for (size_t i = 0; !rc && share_out && !isnan(r->sessions) && i < t->n; i++) {
        const trust_group_t *g = &t->g[i];
        if (strcmp(g->measures, r->measures) && on_platform(g, r) && has_mode(g, r->mode) && g->sessions_hi > 1 &&
            r->sessions >= g->sessions_lo && r->sessions <= g->sessions_hi) {
            snprintf(buf, sizeof buf, "%g session(s) per GPU in mode %s", r->sessions, r->mode);
            rc = add_nearest(a, g, buf);
        }
    }
    for (size_t i = 0; !rc && box_out && r->box && !r->what_if && i < t->n; i++)
        if (!strcmp(t->g[i].box, r->box)) {
            snprintf(buf, sizeof buf, "box %s", r->box);
            rc = add_nearest(a, &t->g[i], buf);
        }
    return rc;
}

int trust_match(const trust_t *t, const trust_regime_t *r, bool (*same_calib)(const char *, void *), void *arg,
                trust_answer_t *out, err_t *e)
{
    memset(out, 0, sizeof *out);
    why_list_t l = {0};
    unsigned lv = 0;
    int rc = ERR_OK;
    for (size_t i = 0; i < t->n && !out->covered; i++) {
        const trust_group_t *g = &t->g[i];
        if (strcmp(g->measures, r->measures)) continue;
        size_t before = l.n;
        lv |= leaves(g, r, same_calib(g->calibration, arg), &l); /* the respects left decide the evidence sought */
        if (l.n == before) out->covered = g;
    }
    if (out->covered) {
        for (size_t k = 0; k < l.n; k++) free(l.v[k]);
        free(l.v);
        l = (why_list_t){.nomem = l.nomem};
    } else if (!l.n && !l.nomem) why_add(&l, "no validation group measured a %s", r->measures);
    out->outside = l.v;
    out->n_outside = l.n;
    if (!out->covered && !l.nomem) rc = nearest(t, r, lv, out);
    /* a decode study's TTFT includes prefill chunks: their group, whatever it says */
    for (size_t i = 0; !rc && !l.nomem && !strcmp(r->measures, "decode_step") && i < t->n; i++)
        if (!strcmp(t->g[i].measures, "prefill_chunk") && on_platform(&t->g[i], r))
            rc = add_nearest(out, &t->g[i], "prefill chunks (part of TTFT)");
    /* sessions sharing a GPU: the sharing rules' test on independent code, covered or not (kbench's
     * own concurrency shapes are the ones the rules were fitted on) */
    for (size_t i = 0; !rc && !l.nomem && !isnan(r->sessions) && r->sessions > 1 && i < t->n; i++) {
        const trust_group_t *g = &t->g[i];
        if (strcmp(g->measures, "random_code") || !has_mode(g, r->mode) || !on_platform(g, r)) continue;
        char buf[128];
        snprintf(buf, sizeof buf, "%g sessions sharing a GPU, independent code", r->sessions);
        rc = add_nearest(out, g, buf);
    }
    if (rc || l.nomem) {
        trust_answer_free(out);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    return ERR_OK;
}

void trust_answer_free(trust_answer_t *a)
{
    for (size_t i = 0; i < a->n_outside; i++) free(a->outside[i]);
    free(a->outside);
    for (size_t i = 0; i < a->n_nearest; i++) free(a->nearest[i].why);
    free(a->nearest);
    memset(a, 0, sizeof *a);
}

/* ---- output ---------------------------------------------------------------------------------- */

static void figures(FILE *fp, const trust_group_t *g)
{
    fprintf(fp, "%s (%s): %.2f%% median, %.2f%% max |error| over %ld cases", g->name, g->about, g->median_pct, g->max_pct,
            g->cases);
    if (*g->note) fprintf(fp, "; %s", g->note);
}

void trust_answer_print(FILE *fp, const char *lead, const trust_answer_t *a)
{
    fputs(lead, fp);
    if (a->covered) {
        fputs("in the regime of ", fp);
        figures(fp, a->covered);
        fprintf(fp, " (odsim %s)\n", a->covered->command);
    } else {
        fputs("outside every validated regime: ", fp);
        for (size_t i = 0; i < a->n_outside; i++) fprintf(fp, "%s%s", i ? "; " : "", a->outside[i]);
        fputc('\n', fp);
    }
    for (size_t i = 0; i < a->n_nearest; i++) {
        fprintf(fp, "  %s: ", a->nearest[i].why);
        figures(fp, a->nearest[i].g);
        fputc('\n', fp);
    }
}

char *trust_answer_text(const trust_answer_t *a)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    if (!fp) return NULL;
    trust_answer_print(fp, "", a);
    fclose(fp);
    return buf;
}

static json_t *group_json(const trust_group_t *g)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:f,s:f,s:s}", "group", g->name, "about", g->about, "measures", g->measures,
                          "box", g->box, "calibration", g->calibration, "cases", (json_int_t)g->cases, "median_abs_err_pct",
                          g->median_pct, "max_abs_err_pct", g->max_pct, "command", g->command);
    if (o && *g->note) json_object_set_new(o, "note", json_string(g->note));
    return o;
}

static json_t *num_or_null(double v)
{
    return isnan(v) ? json_null() : v == floor(v) && fabs(v) < 9e15 ? json_integer((json_int_t)v) : json_real(v);
}

json_t *trust_answer_json(const trust_regime_t *r, const trust_answer_t *a)
{
    json_t *reg = json_pack("{s:s,s:s?,s:o,s:o,s:s?,s:s?,s:s?,s:s?}", "measures", r->measures, "serving_mode", r->mode,
                            "sessions_per_gpu", num_or_null(r->sessions), "context_tokens",
                            json_pack("[o,o]", num_or_null(r->context_lo), num_or_null(r->context_hi)), "model", r->model,
                            "box", r->box, "calibration", r->calibration, "what_if", r->what_if);
    json_t *outside = json_array(), *near = json_array();
    for (size_t i = 0; outside && i < a->n_outside; i++) json_array_append_new(outside, json_string(a->outside[i]));
    for (size_t i = 0; near && i < a->n_nearest; i++) {
        json_t *g = group_json(a->nearest[i].g);
        if (g) json_object_set_new(g, "why", json_string(a->nearest[i].why));
        json_array_append_new(near, g);
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "regime", reg, "covered_by", a->covered ? group_json(a->covered) : json_null(),
                     "outside", outside, "nearest", near);
}
