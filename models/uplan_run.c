/* uplan_run — a user plan's edits applied to a built plan, and user plans as plan providers
 * (models/uplan.h). */
#include "models/uplan.h"

#include <stdlib.h>
#include <string.h>

#include "models/hwinst.h"
#include "models/opkind.h"

static bool edit_matches(const uplan_edit_t *d, const plan_op_t *o)
{
    return o->kind == d->kind && (d->layer < 0 || (o->layer != PLAN_NO_LAYER && o->layer == d->layer));
}

/* The op keeps its place, stream, dependencies and launch, and takes t_ps whatever it moved: a GPU
 * or copy op as fixed time on its engine (a spin), a CPU op as host time. */
static void fixed_time(plan_op_t *o, sim_ps_t t_ps)
{
    o->n_uses = 0;
    memset(&o->cost, 0, sizeof o->cost);
    o->cost_fn = NULL;
    o->cost_model = NULL;
    o->bytes_host = o->bytes_hbm = o->flops = 0;
    o->pieces = 0;
    if (o->exec == PLAN_EXEC_CPU) o->launch_ps = t_ps;
    else o->cost.latency_ps = t_ps;
}

/* A growable list of plan op ids: what each input op stands for in the output (itself, or for a
 * dropped op the ops it waited for), sliced by first/n. */
typedef struct ids {
    uint32_t *v;
    size_t n, cap;
} ids_t;

static int ids_put(ids_t *l, size_t from, uint32_t id, err_t *e)
{
    for (size_t k = from; k < l->n; k++)
        if (l->v[k] == id) return ERR_OK;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 256;
        uint32_t *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) return err_set(e, ERR_NOMEM, "out of memory");
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = id;
    return ERR_OK;
}

/* An edit's op at context n, costed, in place of or after op o: its kind (or o's for a replacement),
 * o's layer, its stream (or o's), out[0..*n_out). */
static int edit_ops(const uplan_t *u, const uplan_edit_t *d, const plan_op_t *o, uint64_t n, const cost_t *c,
                    const cost_paths_t *pa, plan_op_t out[2], uint32_t *n_out, err_t *e)
{
    rf_op_t r;
    int rc = uplan_eval_op(u, &d->op, n, &r, e);
    if (!rc && !d->op.stream_given && r.kind != RF_OP_HOST && r.kind != RF_OP_SYNC) r.stream = o->stream;
    if (!rc) rc = replay_cost_op(&r, c, pa, out, n_out, e);
    if (rc) return err_prefix(e, "%s", d->where);
    if (*n_out == 0) return err_set(e, ERR_INVAL, "%s: a sync cannot replace or follow an op (use a host op)", d->where);
    if (d->op.kind_given || d->what == UPLAN_EDIT_ADD) out[0].kind = (uint16_t)d->op.kind;
    else out[0].kind = o->kind;
    for (uint32_t j = 0; j < *n_out; j++) out[j].layer = o->layer;
    if (d->what == UPLAN_EDIT_REPLACE) out[0].host_sync = o->host_sync;
    return ERR_OK;
}

/* Adds ops[0..n) to out, the first with deps[0..n_deps); its id in *id. */
static int add_ops(plan_t *out, const plan_op_t *ops, uint32_t n, const uint32_t *deps, uint32_t n_deps, uint32_t *id,
                   err_t *e)
{
    int rc = plan_add(out, &ops[0], deps, n_deps, id, e);
    for (uint32_t j = 1; !rc && j < n; j++) rc = plan_add(out, &ops[j], NULL, 0, NULL, e);
    return rc;
}

int uplan_apply_edits(const uplan_t *u, const plan_t *in, uint64_t context, const cost_t *c, const cost_paths_t *pa,
                      plan_t *out, uint32_t *matched, err_t *e)
{
    plan_reset(out, in->phase, in->tokens);
    out->graph_launch_ps = in->graph_launch_ps;
    if (matched) memset(matched, 0, u->n_edits * sizeof *matched);
    size_t *first = malloc(((size_t)in->n_ops + 1) * sizeof *first), *count = malloc(((size_t)in->n_ops + 1) * sizeof *count);
    ids_t rep = {0}, deps = {0};
    int rc = first && count ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; !rc && i < in->n_ops; i++) {
        const plan_op_t *o = &in->ops[i];
        /* its dependencies: what each of its predecessors stands for */
        deps.n = 0;
        for (uint32_t k = 0; !rc && k < o->n_deps; k++) {
            uint32_t p = in->deps[o->dep_first + k];
            for (size_t q = 0; !rc && q < count[p]; q++) rc = ids_put(&deps, 0, rep.v[first[p] + q], e);
        }
        const uplan_edit_t *which = NULL;
        for (uint32_t d = 0; !rc && d < u->n_edits; d++) {
            const uplan_edit_t *ed = &u->edits[d];
            if (ed->what == UPLAN_EDIT_ADD || !edit_matches(ed, o)) continue;
            if (matched) matched[d]++;
            if (which)
                rc = err_set(e, ERR_INVAL, "%s: this edit and the one at %s both change op %u (%s, layer %d)", ed->where,
                             which->where, i, opkind_name(o->kind), o->layer == PLAN_NO_LAYER ? -1 : (int)o->layer);
            which = ed;
        }
        if (rc) break;
        first[i] = rep.n;
        if (which && which->what == UPLAN_EDIT_DROP) {
            /* its successors wait for what it waited for */
            for (size_t q = 0; !rc && q < deps.n; q++) rc = ids_put(&rep, first[i], deps.v[q], e);
        } else {
            plan_op_t ops[2] = {*o};
            uint32_t n_ops = 1, id;
            if (which && which->what == UPLAN_EDIT_US) {
                rf_op_t t;   /* its time, grown with the context as a spin's */
                rc = uplan_eval_op(u, &which->op, context, &t, e);
                fixed_time(&ops[0], cost_ps((double)t.us * 1e-6));
            } else if (which) {
                rc = edit_ops(u, which, o, context, c, pa, ops, &n_ops, e);
            }
            if (!rc) rc = add_ops(out, ops, n_ops, deps.v, (uint32_t)deps.n, &id, e);
            if (!rc) rc = ids_put(&rep, first[i], id, e);
        }
        count[i] = rep.n - first[i];
        /* ops added after it wait for what it stands for */
        for (uint32_t d = 0; !rc && d < u->n_edits; d++) {
            const uplan_edit_t *ed = &u->edits[d];
            if (ed->what != UPLAN_EDIT_ADD || !edit_matches(ed, o)) continue;
            if (matched) matched[d]++;
            plan_op_t ops[2];
            uint32_t n_ops;
            rc = edit_ops(u, ed, o, context, c, pa, ops, &n_ops, e);
            if (!rc) rc = add_ops(out, ops, n_ops, rep.v + first[i], (uint32_t)count[i], NULL, e);
        }
    }
    if (!rc) rc = plan_validate(out, e);
    free(first);
    free(count);
    free(rep.v);
    free(deps.v);
    return rc;
}

int uplan_check_edits(const uplan_t *u, provider_t *p, const sim_t *sim, const hw_t *hw, err_t *e)
{
    plan_t in, out;
    plan_init(&in);
    plan_init(&out);
    uint32_t *matched = calloc(u->n_edits + 1, sizeof *matched);
    cost_paths_t paths;
    plan_request_t req = {PLAN_DECODE, u->context, 1, 0};
    int rc = matched ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
    if (!rc) rc = provider_build(p, sim, 0, &req, &in, e);
    if (!rc) rc = cost_paths_resolve(provider_cost(p), hw, sim, 0, HWINST_DRAM, &paths, e);
    if (!rc) rc = uplan_apply_edits(u, &in, u->context, provider_cost(p), &paths, &out, matched, e);
    for (uint32_t d = 0; !rc && d < u->n_edits; d++) {
        const uplan_edit_t *ed = &u->edits[d];
        if (matched[d]) continue;
        char layer[32] = "";
        if (ed->layer >= 0) snprintf(layer, sizeof layer, " in layer %d", ed->layer);
        rc = err_set(e, ERR_INVAL, "%s: this edit matches no op: the %s plan at context %llu has no %s op%s", ed->where,
                     method_name(provider_method(p)), (unsigned long long)u->context, opkind_name(ed->kind), layer);
    }
    free(matched);
    plan_free(&in);
    plan_free(&out);
    return rc;
}

/* ---- the provider ----------------------------------------------------------------------------- */

typedef struct uprov {
    const uplan_t *u;
    int layers;
    const hw_t *hw;
    const cost_t *cost;
    plan_provider_t base;        /* edits: the built-in provider (ops NULL for a whole plan) */
    plan_t scratch;              /* base's plan before the edits */
    cost_paths_t paths;
    const sim_t *paths_sim;
    int paths_gpu;
    rf_session_t s;              /* a whole plan's step at the context asked */
    replay_label_t labels[RF_MAX_OPS];
    uint32_t plan_of[RF_MAX_OPS];
} uprov_t;

static int ops_build(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out, err_t *e)
{
    uprov_t *p = self;
    const sim_t *sim = plan_env_sim(env);
    int gpu = plan_env_gpu(env), rc = ERR_OK;
    if (p->paths_sim != sim || p->paths_gpu != gpu) {
        rc = cost_paths_resolve(p->cost, p->hw, sim, gpu, HWINST_DRAM, &p->paths, e);
        if (rc) return rc;
        p->paths_sim = sim;
        p->paths_gpu = gpu;
    }
    if (!p->base.ops) {
        rc = uplan_session(p->u, req->context_tokens, p->layers, &p->s, p->labels, e);
        if (!rc) rc = replay_cost_session(&p->s, p->cost, &p->paths, p->labels, out, p->plan_of, e);
        return rc ? err_prefix(e, "plan '%s'", p->u->name) : ERR_OK;
    }
    plan_reset(&p->scratch, out->phase, out->tokens);
    rc = p->base.ops->build(p->base.self, env, req, &p->scratch, e);
    if (!rc) rc = uplan_apply_edits(p->u, &p->scratch, req->context_tokens, p->cost, &p->paths, out, NULL, e);
    return rc;
}

static int ops_completed(void *self, plan_env_t *env, const plan_request_t *req, err_t *e)
{
    uprov_t *p = self;
    return p->base.ops && p->base.ops->completed ? p->base.ops->completed(p->base.self, env, req, e) : ERR_OK;
}

static int ops_footprint(void *self, uint64_t context_tokens, double *hbm_bytes, double *host_bytes, err_t *e)
{
    uprov_t *p = self;
    if (p->base.ops) {
        if (p->base.ops->footprint) return p->base.ops->footprint(p->base.self, context_tokens, hbm_bytes, host_bytes, e);
        *hbm_bytes = *host_bytes = 0;
        return ERR_OK;
    }
    int rc = uplan_session(p->u, context_tokens, p->layers, &p->s, NULL, e);
    if (rc) return err_prefix(e, "plan '%s'", p->u->name);
    replay_footprint(&p->s, hbm_bytes, host_bytes);
    return ERR_OK;
}

static void ops_destroy(void *self, plan_env_t *env)
{
    uprov_t *p = self;
    if (p->base.ops && p->base.ops->destroy) p->base.ops->destroy(p->base.self, env);
    plan_free(&p->scratch);
    free(p);
}

static const plan_provider_ops_t uplan_ops = {"odsim-uplan", ops_build, ops_completed, ops_footprint, ops_destroy};

int uplan_provider(const uplan_t *u, int layers, const hw_t *hw, const cost_t *cost, plan_provider_t base,
                   plan_provider_t *out, err_t *e)
{
    uprov_t *p = calloc(1, sizeof *p);
    if (!p) return err_set(e, ERR_NOMEM, "out of memory");
    p->u = u;
    p->layers = layers;
    p->hw = hw;
    p->cost = cost;
    p->base = base;
    p->paths_gpu = -1;
    plan_init(&p->scratch);
    *out = (plan_provider_t){&uplan_ops, p};
    return ERR_OK;
}
