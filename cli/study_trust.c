/* study_trust — which validation group covers each point of a study (cli/study_trust.h). */
#include "cli/study_trust.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/study_int.h"
#include "traces/tracegen.h"

int study_trust_load(const study_t *s, trust_t **out, err_t *e)
{
    char *path = study_path(s, STUDY_TRUST_FILE);
    if (!path) return err_set(e, ERR_NOMEM, "out of memory");
    int rc = trust_load(path, out, e);
    free(path);
    return rc;
}

/* The hardware keys besides `box` (a what-if on the measured box), "" when none. */
static void what_if_of(const cfg_node_t *hw, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (size_t j = 0; hw && j < cfg_size(hw) && k < n; j++)
        if (strcmp(cfg_key_at(hw, j), "box"))
            k += (size_t)snprintf(buf + k, n - k, "%shardware.%s", k ? ", " : "", cfg_key_at(hw, j));
}

/* The generator's sessions per GPU and context range into r (unknown ones with their reason). */
static int generator_regime(const study_point_t *pt, uint32_t sessions, trust_regime_t *r, err_t *e)
{
    tracegen_t *g = NULL;
    const uint64_t seed = 0;
    int rc = tracegen_new(pt->wl.generator, &seed, &g, e);
    if (rc) return rc;
    uint64_t lo, hi;
    tracegen_contexts(g, &lo, &hi);
    r->context_lo = (double)lo;
    r->context_hi = (double)hi;
    const trace_header_t *h = tracegen_header(g);
    uint32_t users = sessions ? sessions : h->session_arrivals == TRACE_ARRIVALS_CLOSED ? h->population : 0;
    int gpus = pt->hw.gpus > 0 ? pt->hw.gpus : 1;
    if (users) r->sessions = ceil((double)users / gpus);
    else r->sessions_why = "vary with open (Poisson) arrivals";
    tracegen_free(g);
    return ERR_OK;
}

static const char *probe_measures(int what)
{
    switch (what) {
    case SCN_PROBE_OP: return "op";
    case SCN_PROBE_LAYER_STEP: return "layer_step";
    case SCN_PROBE_PREFILL_CHUNK: return "prefill_chunk";
    default: return "decode_step";
    }
}

typedef struct calib_cmp {
    const study_t *s;
    const char *mine; /* the point's profile path, or NULL: presets alone */
} calib_cmp_t;

/* Whether the group's profile (relative to the data root) is the point's file. */
static bool same_calib(const char *group_calib, void *arg)
{
    const calib_cmp_t *c = arg;
    if (!c->mine) return false;
    char *g = study_path(c->s, group_calib);
    char a[PATH_MAX], b[PATH_MAX];
    bool same = g && realpath(g, a) && realpath(c->mine, b) && !strcmp(a, b);
    free(g);
    return same;
}

int study_trust_of(study_t *s, const trust_t *t, size_t i, uint32_t sessions, study_trust_t *out, err_t *e)
{
    memset(out, 0, sizeof *out);
    study_point_t pt;
    int rc = study_point_resolve(s, i, &pt, e);
    if (rc) return rc;
    trust_regime_t *r = &out->r;
    snprintf(out->measures, sizeof out->measures, "%s", pt.wl.kind == SCN_WL_PROBE ? probe_measures(pt.probe.what) : "decode_step");
    snprintf(out->mode, sizeof out->mode, "%s", exec_mode_name((exec_mode_t)pt.serving.mode));
    snprintf(out->model, sizeof out->model, "%s%s", pt.model.name, pt.model.set ? " with shape overrides" : "");
    snprintf(out->box, sizeof out->box, "%s", pt.hw.box);
    snprintf(out->calibration, sizeof out->calibration, "%s", pt.top.calibration ? pt.top.calibration : "(presets)");
    what_if_of(pt.top.hardware, out->what_if, sizeof out->what_if);
    *r = (trust_regime_t){.measures = out->measures, .mode = out->mode, .sessions = NAN, .context_lo = NAN, .context_hi = NAN,
                          .model = out->model, .box = out->box, .calibration = out->calibration,
                          .what_if = *out->what_if ? out->what_if : NULL};
    if (pt.wl.kind == SCN_WL_GENERATOR) rc = generator_regime(&pt, sessions, r, e);
    else if (pt.wl.kind == SCN_WL_PROBE) {
        r->context_lo = r->context_hi = (double)pt.probe.n_tokens;
        r->sessions = (double)(pt.probe.sessions > pt.probe.streams ? pt.probe.sessions : pt.probe.streams);
        if (!(r->sessions >= 1)) r->sessions = 1;
    } else {
        r->context_why = "of a trace: not known before the run";
        r->sessions_why = "of a trace: not known before the run";
        if (sessions) r->sessions = ceil((double)sessions / (pt.hw.gpus > 0 ? pt.hw.gpus : 1));
    }
    calib_cmp_t cmp = {s, pt.calib_path};
    if (!rc) rc = trust_match(t, r, same_calib, &cmp, &out->a, e);
    study_point_free(&pt);
    return rc;
}

void study_trust_free(study_trust_t *v) { trust_answer_free(&v->a); }

void study_trust_print(FILE *fp, const study_t *s, const study_trust_t *v, size_t first, size_t n)
{
    char *t0 = n ? trust_answer_text(&v[0].a) : NULL;
    bool same = t0 != NULL;
    for (size_t i = 1; same && i < n; i++) {
        char *ti = trust_answer_text(&v[i].a);
        same = ti && !strcmp(ti, t0);
        free(ti);
    }
    free(t0);
    char lead[512];
    if (same && n > 1) {
        snprintf(lead, sizeof lead, "validation, all %zu points: ", n);
        trust_answer_print(fp, lead, &v[0].a);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(lead, sizeof lead, "validation, point %zu (%s): ", first + i, study_point_label(s, first + i));
        trust_answer_print(fp, lead, &v[i].a);
    }
}

json_t *study_trust_json(const study_trust_t *v) { return trust_answer_json(&v->r, &v->a); }
