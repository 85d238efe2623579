/* Session classes within a replication: assignment, per-class methods and session shapes. */
#include "cli/study_class.h"

#include <stdlib.h>
#include <string.h>

#include "cli/study_int.h"
#include "traces/tracegen.h"

struct study_classes {
    size_t n;
    double *share;              /* n shares (the point's classes') */
    method_t **own;             /* a class's own method, or NULL */
    const method_t *shared;     /* the scenario's, borrowed */
    tracegen_t **gen;           /* a class's generator, or NULL */
    cfg_doc_t **gen_doc;        /* its merged parameters */
    trace_session_t scratch;    /* a class generator's session, before it takes the scenario's place */
    uint32_t *of;               /* class of each index assigned so far */
    uint64_t n_of, cap_of;
    uint64_t *held;             /* indices per class among of[0..n_of) */
    uint64_t *sessions, *tokens_at_warmup;
};

void study_classes_free(study_classes_t *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        if (c->own) method_free(c->own[i]);
        if (c->gen) tracegen_free(c->gen[i]);
        if (c->gen_doc) cfg_free(c->gen_doc[i]);
    }
    trace_session_free(&c->scratch);
    free(c->share);
    free(c->own);
    free(c->gen);
    free(c->gen_doc);
    free(c->of);
    free(c->held);
    free(c->sessions);
    free(c->tokens_at_warmup);
    free(c);
}

/* Class cls's generator parameters: the scenario's workload.generator with the class's keys laid
 * over it (a new document in *out). */
static int class_gen_doc(const study_point_t *pt, const scn_class_t *cl, cfg_doc_t **out, err_t *e)
{
    if (pt->wl.generator) return cfg_merge(pt->wl.generator, cl->generator, false, out, e);
    /* no scenario generator section: the defaults under the class's keys */
    cfg_doc_t *empty;
    int rc = cfg_parse_string("defaults", "{}", 2, &empty, e);
    if (rc) return rc;
    rc = cfg_merge(cfg_root(empty), cl->generator, false, out, e);
    cfg_free(empty);
    return rc;
}

/* Builds class i's own method and generator into c (either may be absent). */
static int class_build(const study_point_t *pt, size_t i, uint32_t k, int64_t plans_seed, study_classes_t *c, err_t *e)
{
    const scn_class_t *cl = &pt->classes[i];
    int rc = ERR_OK;
    if (cl->method) {
        method_cfg_t mcfg = pt->class_mcfg[i];
        mcfg.seed = plans_seed;
        rc = method_new(&mcfg, &pt->llm, &c->own[i], e);
    }
    if (!rc && cl->generator) {
        uint64_t seed = study_seed(pt, k, STUDY_STREAM_CLASS + (int)i);
        rc = class_gen_doc(pt, cl, &c->gen_doc[i], e);
        if (!rc) rc = tracegen_new(cfg_root(c->gen_doc[i]), &seed, &c->gen[i], e);
    }
    if (rc) err_prefix(e, "class '%s'", cl->name);
    return rc;
}

int study_classes_new(const study_point_t *pt, uint32_t k, int64_t plans_seed, const method_t *shared,
                      study_classes_t **out, err_t *e)
{
    *out = NULL;
    size_t n = pt->n_classes;
    study_classes_t *c = calloc(1, sizeof *c);
    if (!c) return err_set(e, ERR_NOMEM, "out of memory");
    c->n = n;
    c->shared = shared;
    trace_session_init(&c->scratch);
    c->share = calloc(n, sizeof *c->share);
    c->own = calloc(n, sizeof *c->own);
    c->gen = calloc(n, sizeof *c->gen);
    c->gen_doc = calloc(n, sizeof *c->gen_doc);
    c->held = calloc(n, sizeof *c->held);
    c->sessions = calloc(n, sizeof *c->sessions);
    c->tokens_at_warmup = calloc(n, sizeof *c->tokens_at_warmup);
    int rc = c->share && c->own && c->gen && c->gen_doc && c->held && c->sessions && c->tokens_at_warmup
                 ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        c->share[i] = pt->classes[i].share;
        rc = class_build(pt, i, k, plans_seed, c, e);
    }
    if (rc) {
        study_classes_free(c);
        return rc;
    }
    *out = c;
    return ERR_OK;
}

int study_classes_check(const study_point_t *pt, err_t *e)
{
    study_classes_t *c;
    int rc = study_classes_new(pt, 0, pt->mcfg.seed, pt->method, &c, e);
    study_classes_free(c);
    return rc;
}

int study_classes_of(study_classes_t *c, uint64_t i, uint32_t *cls, err_t *e)
{
    while (c->n_of <= i) {
        if (c->n_of == c->cap_of) {
            uint64_t cap = c->cap_of ? 2 * c->cap_of : 256;
            uint32_t *of = realloc(c->of, cap * sizeof *of);
            if (!of) return err_set(e, ERR_NOMEM, "out of memory");
            c->of = of;
            c->cap_of = cap;
        }
        /* the class furthest below its share of the first n_of + 1 indices; ties to the first listed */
        size_t best = 0;
        double want = (double)(c->n_of + 1), gap_best = c->share[0] * want - (double)c->held[0];
        for (size_t j = 1; j < c->n; j++) {
            double gap = c->share[j] * want - (double)c->held[j];
            if (gap > gap_best) best = j, gap_best = gap;
        }
        c->held[best]++;
        c->of[c->n_of++] = (uint32_t)best;
    }
    *cls = c->of[i];
    return ERR_OK;
}

const method_t *study_classes_method(const study_classes_t *c, uint32_t cls)
{
    return c->own[cls] ? c->own[cls] : c->shared;
}

void study_classes_count(study_classes_t *c, uint32_t cls) { c->sessions[cls]++; }
uint64_t study_classes_sessions(const study_classes_t *c, uint32_t cls) { return c->sessions[cls]; }

int study_classes_reshape(study_classes_t *c, uint64_t i, trace_session_t *ts, err_t *e)
{
    uint32_t cls;
    int rc = study_classes_of(c, i, &cls, e);
    if (rc || !c->gen[cls]) return rc;
    int got = tracegen_next_session(c->gen[cls], &c->scratch, e);
    if (got < 0) return got;
    if (!got || !c->scratch.n_turns) return err_set(e, ERR_INVAL, "class %u's generator drew no session %llu", cls, (unsigned long long)i);
    trace_session_t *s = &c->scratch;
    s->id = ts->id;
    s->arrival_ns = ts->arrival_ns;
    s->user = ts->user;
    s->start_think_ns = ts->start_think_ns;
    s->turns[0].arrival_ns = ts->n_turns ? ts->turns[0].arrival_ns : ts->arrival_ns;
    trace_session_t keep = *ts;   /* the buffers swap: the scratch session is reused for the next */
    *ts = *s;
    *s = keep;
    return ERR_OK;
}

void study_classes_warmup(study_classes_t *c, exec_t *x)
{
    for (size_t i = 0; i < c->n; i++) c->tokens_at_warmup[i] = exec_group_stats(x, (uint32_t)i)->decode_tokens;
}

uint64_t study_classes_tokens_at_warmup(const study_classes_t *c, uint32_t cls) { return c->tokens_at_warmup[cls]; }
