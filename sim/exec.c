#include "sim/exec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- types ---------------------------------------------------------------------------------- */

typedef struct ctx ctx_t;
typedef struct run run_t;
typedef struct sess sess_t;
typedef struct gpu gpu_t;

/* One op of a running plan (several sessions' ops when merged). */
typedef struct xop {
    plan_op_t op;            /* copy; dependency fields unused */
    run_t *run;
    uint32_t batch;          /* sessions it serves */
    uint32_t pending;        /* predecessors not done (explicit and stream order) */
    uint32_t succ_first, n_succ;
    bool launched, started, waiting_gpu, done;
    bool turn_given;         /* gathers_exclusive: taken off the wait list, starts now */
    bool segment_start;      /* with CUDA graphs: first op of a graph segment */
    bool q_blocked;          /* behind an op of its hardware queue that has not started */
    struct xop *q_next;      /* the op launched after it on its hardware queue, waiting for it */
    int8_t queue;            /* its hardware queue, -1 if none */
    uint32_t pos;            /* issue position in the run */
    sim_ps_t t_launch, t_deps, t_ready, t_start, t_end; /* t_deps: predecessors done */
    uint64_t session;
} xop_t;

struct run {
    exec_t *x;
    ctx_t *ctx;
    gpu_t *gpu;
    xop_t *ops;              /* in issue order */
    uint32_t n_ops, n_done;
    uint32_t *succ;          /* successor lists, sliced by xop.succ_first/n_succ */
    uint32_t next_launch;    /* first op not yet launched */
    bool in_launch_queue;
    run_t *launch_next;      /* launch-thread FIFO link */
    sess_t **members;
    uint32_t n_members;
    sim_ps_t t_begin;
    sim_ps_t t_window;       /* when an event recorded before its first op would fire: its beginning,
                              * or later when that op waited behind its hardware queue */
    uint64_t seq;            /* plan index (timeline) */
    bool traced;
    run_t *prev, *next;      /* the executor's list of runs in flight */
};

/* A CUDA context: its launch thread (a serial FIFO server) and its hardware work queues. */
struct ctx {
    exec_t *x;
    struct xop *hwq_tail[EXEC_MAX_HW_QUEUES]; /* last op launched on each queue, until it starts */
    uint32_t streams_made;   /* streams given a queue so far (round robin) */
    sim_ps_t busy_ps;        /* total launch time */
    run_t *launching;        /* the run whose next op is being launched (NULL: idle) */
    run_t *q_head, *q_tail;
    sim_ps_t slice_debt_ps;  /* processes: how far its last slice ran past its length (an op in
                              * flight is not preempted): taken off its next slice */
};

/* Waiting GPU ops of other contexts under time slicing, FIFO. */
typedef struct gpu_wait {
    xop_t **ops;
    size_t n, cap, head;
} gpu_wait_t;

struct gpu {
    int index;
    ctx_t *owner;            /* processes: context whose kernels hold the GPU (NULL: idle or switching) */
    uint32_t owner_running;
    sim_ps_t slice_start;    /* processes: when the owner got the GPU */
    sim_ps_t slice_ps;       /* processes: the owner's slice, timeslice_ps less its debt */
    ctx_t *last_owner;       /* processes: the context the GPU holds the state of */
    bool switching;          /* processes: passing to the next waiting context */
    gpu_wait_t waits;
    uint32_t kind_running[3];/* gathers_exclusive: ops running by excl_kind */
    gpu_wait_t turn_waits;   /* gathers_exclusive: ops waiting for the other kind to drain, FIFO */
    bool in_turns, turns_again;
    bool iterating;          /* batching: an iteration is running */
    sess_t **ready;          /* batching: sessions waiting for the next iteration */
    size_t n_ready, cap_ready;
    uint32_t live;           /* admitted, unfinished sessions */
    uint32_t waiting_mem;    /* admitted sessions preempted for memory */
    bool in_mem_kick, mem_kick_again;
    bool kick_pending;       /* batching: a kick_ev is scheduled */
    exec_t *x;
    sess_t **admitq;         /* sessions waiting for memory (admission or growth), FIFO */
    size_t n_admitq, cap_admitq;
};

typedef enum { S_ARRIVING, S_WAIT_MEM, S_THINKING, S_READY, S_RUNNING, S_DONE } sess_state_t;

struct plan_env {
    exec_t *x;
    sess_t *s;
};

struct sess {
    exec_t *x;
    uint64_t id;
    gpu_t *gpu;
    ctx_t *ctx;
    plan_provider_t prov;
    plan_env_t env;
    exec_turn_t *turns;
    size_t n_turns, turn;
    bool open_loop;
    sess_state_t state;
    uint64_t context, final_tokens;
    uint32_t prefill_left, decode_left;
    plan_request_t req;      /* the request of the plan being built or run */
    plan_t plan;
    plan_t fine;             /* coarse mode: the provider's plan, before plan_coarsen */
    plan_request_t built;    /* coarse mode: the request s->plan was built for */
    bool have_built;
    uint64_t plans;
    bool admitted, first_token_done;
    sim_ps_t t_arrive, t_turn_ready, t_first_token, t_decode_ps;
    uint64_t decoded;
    double hbm_held, host_held;
    int8_t *queue_of;        /* hardware queue by plan stream (-1: none yet); NULL until first needed */
};

struct exec {
    sim_t *sim;
    exec_config_t cfg;
    gpu_t *gpus;
    ctx_t *gpu_ctx;          /* streams and batching: one process (host thread) per GPU */
    sess_t **sessions;
    size_t n_sessions, cap_sessions;
    exec_stats_t stats;
    uint64_t plans_started;
    exec_trace_op_t *timeline;
    size_t n_timeline, cap_timeline;
    sim_pool_t *hbm_pool;
    run_t *runs;             /* in flight (freed by exec_free when the simulation stops first) */
    uint64_t jitter_state;   /* SplitMix64 state of the ops' jitter */
    sess_t **arriving;       /* sessions arrived at this instant, admitted together by id */
    size_t n_arriving, cap_arriving;
    bool arrivals_pending;
};

static void run_kick_launch(run_t *r);
static void ctx_kick(exec_t *x, ctx_t *c);
static void op_try_start(xop_t *o);
static void op_start(xop_t *o);
static void op_begin_flow(xop_t *o);
static void sess_next(sess_t *s);
static void gpu_kick_batch(exec_t *x, gpu_t *g);
static void mem_kick(exec_t *x, gpu_t *g);
static void sess_blocked(sess_t *s);
static void gpu_kick_later(exec_t *x, gpu_t *g);

/* The per-GPU context every session of a streams or batching run shares (not to be freed alone). */
static bool shared_ctx(const exec_t *x, const ctx_t *c)
{
    for (int g = 0; g < x->cfg.n_gpus; g++)
        if (c == &x->gpu_ctx[g]) return true;
    return false;
}

static void fail(exec_t *x, int code, const char *what)
{
    err_t e;
    err_set(&e, code, "%s", what);
    sim_fail(x->sim, &e);
}

static void fail_err(exec_t *x, const err_t *e) { sim_fail(x->sim, e); }

static int push_ptr(void ***arr, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 8;
        void **na = realloc(*arr, nc * sizeof *na);
        if (!na) return ERR_NOMEM;
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = p;
    return ERR_OK;
}

static double ps_to_s(sim_ps_t t) { return (double)t / (double)SIM_PS_PER_S; }
static sim_ps_t s_to_ps(double s) { return (sim_ps_t)ceil(s * (double)SIM_PS_PER_S); }

/* ---- plan_env ------------------------------------------------------------------------------- */

sim_res_t plan_env_res(const plan_env_t *env, const char *name) { return sim_res_find(env->x->sim, name); }
const sim_t *plan_env_sim(const plan_env_t *env) { return env->x->sim; }
int plan_env_gpu(const plan_env_t *env) { return env->s->gpu->index; }
uint64_t plan_env_session(const plan_env_t *env) { return env->s->id; }

static sim_pool_t env_pool(const plan_env_t *env, bool hbm)
{
    const exec_t *x = env->x;
    return hbm ? (x->hbm_pool ? x->hbm_pool[env->s->gpu->index] : -1) : x->cfg.host_pool;
}

int plan_env_alloc(plan_env_t *env, bool hbm, double bytes, err_t *e)
{
    sim_pool_t p = env_pool(env, hbm);
    return p < 0 ? ERR_OK : sim_pool_alloc(env->x->sim, p, bytes, e);
}

void plan_env_release(plan_env_t *env, bool hbm, double bytes)
{
    sim_pool_t p = env_pool(env, hbm);
    if (p >= 0) sim_pool_release(env->x->sim, p, bytes);
}

/* ---- building a run: merge, issue order, stream order ---------------------------------------- */

typedef struct edge { uint32_t from, to; } edge_t;

typedef struct builder {
    xop_t *ops;
    uint32_t n, cap;
    edge_t *edges;
    size_t n_edges, cap_edges;
} builder_t;

static int b_edge(builder_t *b, uint32_t from, uint32_t to)
{
    if (b->n_edges == b->cap_edges) {
        size_t nc = b->cap_edges ? 2 * b->cap_edges : 64;
        edge_t *ne = realloc(b->edges, nc * sizeof *ne);
        if (!ne) return ERR_NOMEM;
        b->edges = ne;
        b->cap_edges = nc;
    }
    b->edges[b->n_edges++] = (edge_t){from, to};
    return ERR_OK;
}

static int b_op(builder_t *b, const plan_op_t *op, uint64_t session, uint32_t *id)
{
    if (b->n == b->cap) {
        uint32_t nc = b->cap ? 2 * b->cap : 64;
        xop_t *no = realloc(b->ops, nc * sizeof *no);
        if (!no) return ERR_NOMEM;
        b->ops = no;
        b->cap = nc;
    }
    xop_t *o = &b->ops[b->n];
    memset(o, 0, sizeof *o);
    o->op = *op;
    o->batch = 1;
    o->session = session;
    *id = b->n++;
    return ERR_OK;
}

/* Finds an earlier op with the same merge key (linear in the distinct keys; plans carry few). */
typedef struct keyslot { uint64_t key; uint32_t id; } keyslot_t;

static long key_find(const keyslot_t *k, size_t n, uint64_t key)
{
    for (size_t i = 0; i < n; i++)
        if (k[i].key == key) return (long)k[i].id;
    return -1;
}

/* Adds the ops of every member's plan to b, merging equal keys; each plan's own order and
 * dependencies become edges. Members are visited op index by op index (round robin), so the
 * sessions' layers interleave. */
static int build_merged(builder_t *b, sess_t **mem, uint32_t n_mem)
{
    uint32_t max_ops = 0;
    for (uint32_t m = 0; m < n_mem; m++)
        if (mem[m]->plan.n_ops > max_ops) max_ops = mem[m]->plan.n_ops;
    uint32_t **map = calloc(n_mem, sizeof *map);
    keyslot_t *keys = NULL;
    size_t n_keys = 0, cap_keys = 0;
    int rc = map ? ERR_OK : ERR_NOMEM;
    for (uint32_t m = 0; !rc && m < n_mem; m++)
        if (!(map[m] = malloc((mem[m]->plan.n_ops + 1) * sizeof **map))) rc = ERR_NOMEM;
    for (uint32_t i = 0; !rc && i < max_ops; i++) {
        for (uint32_t m = 0; !rc && m < n_mem; m++) {
            const plan_t *p = &mem[m]->plan;
            if (i >= p->n_ops) continue;
            const plan_op_t *op = &p->ops[i];
            long found = op->merge_key && n_mem > 1 ? key_find(keys, n_keys, op->merge_key) : -1;
            uint32_t id = 0;
            if (found >= 0) {
                id = (uint32_t)found;
                b->ops[id].batch++;
            } else {
                rc = b_op(b, op, mem[m]->id, &id);
                if (!rc && op->merge_key) {
                    if (n_keys == cap_keys) {
                        cap_keys = cap_keys ? 2 * cap_keys : 64;
                        keyslot_t *nk = realloc(keys, cap_keys * sizeof *nk);
                        if (!nk) {
                            rc = ERR_NOMEM;
                            break;
                        }
                        keys = nk;
                    }
                    keys[n_keys++] = (keyslot_t){op->merge_key, id};
                }
            }
            if (rc) break;
            map[m][i] = id;
            for (uint32_t k = 0; !rc && k < op->n_deps; k++) rc = b_edge(b, map[m][p->deps[op->dep_first + k]], id);
        }
    }
    for (uint32_t m = 0; map && m < n_mem; m++) free(map[m]);
    free(map);
    free(keys);
    return rc;
}

/* Issue order: a topological order of the merged DAG that takes, among ready ops, the one created
 * first (for a single plan that is the plan's own order). Writes perm[new position] = old id. */
static int issue_order(const builder_t *b, uint32_t *perm)
{
    uint32_t n = b->n;
    uint32_t *indeg = calloc(n + 1, sizeof *indeg), *first = calloc(n + 2, sizeof *first);
    uint32_t *adj = malloc((b->n_edges + 1) * sizeof *adj), *heap = malloc((n + 1) * sizeof *heap);
    int rc = (indeg && first && adj && heap) ? ERR_OK : ERR_NOMEM;
    for (size_t i = 0; !rc && i < b->n_edges; i++) {
        first[b->edges[i].from + 2]++;
        indeg[b->edges[i].to]++;
    }
    for (uint32_t i = 0; !rc && i < n; i++) first[i + 2] += first[i + 1];
    for (size_t i = 0; !rc && i < b->n_edges; i++) adj[first[b->edges[i].from + 1]++] = b->edges[i].to;
    size_t hn = 0, out = 0;
    for (uint32_t i = 0; !rc && i < n; i++) {
        if (indeg[i]) continue;
        heap[hn++] = i; /* ids ascending: already a valid min-heap */
    }
    while (!rc && hn) {
        uint32_t u = heap[0];
        heap[0] = heap[--hn];
        for (size_t i = 0;;) { /* sift down */
            size_t l = 2 * i + 1, r = l + 1, m = i;
            if (l < hn && heap[l] < heap[m]) m = l;
            if (r < hn && heap[r] < heap[m]) m = r;
            if (m == i) break;
            uint32_t t = heap[i]; heap[i] = heap[m]; heap[m] = t;
            i = m;
        }
        perm[out++] = u;
        for (uint32_t k = first[u]; k < first[u + 1]; k++) {
            uint32_t v = adj[k];
            if (--indeg[v]) continue;
            size_t i = hn++;
            heap[i] = v;
            while (i && heap[(i - 1) / 2] > heap[i]) { /* sift up */
                uint32_t t = heap[i]; heap[i] = heap[(i - 1) / 2]; heap[(i - 1) / 2] = t;
                i = (i - 1) / 2;
            }
        }
    }
    if (!rc && out != n) rc = ERR_CYCLE;
    free(indeg);
    free(first);
    free(adj);
    free(heap);
    return rc;
}

static uint64_t edge_key(uint32_t from, uint32_t to) { return (uint64_t)from << 32 | to; }

static int key_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The builder's edges as sorted keys (*keys, owned by the caller), to look an edge up. */
static int edge_keys(const builder_t *b, uint64_t **keys)
{
    *keys = malloc((b->n_edges + 1) * sizeof **keys);
    if (!*keys) return ERR_NOMEM;
    for (size_t i = 0; i < b->n_edges; i++) (*keys)[i] = edge_key(b->edges[i].from, b->edges[i].to);
    qsort(*keys, b->n_edges, sizeof **keys, key_cmp);
    return ERR_OK;
}

/* Lays the builder's ops out in issue order in r, adds stream-order edges where no explicit edge
 * already joins the two ops (one wait, so a kernel after a copy draws one hand-off), builds successor
 * lists. */
static int run_layout(run_t *r, builder_t *b)
{
    uint32_t n = b->n;
    uint32_t *perm = malloc((n + 1) * sizeof *perm), *pos = malloc((n + 1) * sizeof *pos);
    uint64_t *keys = NULL;
    int rc = (perm && pos) ? issue_order(b, perm) : ERR_NOMEM;
    if (!rc) {
        for (uint32_t i = 0; i < n; i++) pos[perm[i]] = i;
        for (size_t i = 0; i < b->n_edges; i++) b->edges[i] = (edge_t){pos[b->edges[i].from], pos[b->edges[i].to]};
        r->ops = malloc((n + 1) * sizeof *r->ops);
        rc = r->ops ? edge_keys(b, &keys) : ERR_NOMEM;
    }
    size_t n_explicit = b->n_edges;
    uint32_t last_on_stream[256];
    memset(last_on_stream, 0xff, sizeof last_on_stream);
    for (uint32_t i = 0; !rc && i < n; i++) {
        r->ops[i] = b->ops[perm[i]];
        r->ops[i].pos = i;
        r->ops[i].run = r;
        uint8_t st = r->x->cfg.one_stream ? 0 : r->ops[i].op.stream;
        uint64_t k = edge_key(last_on_stream[st], i);
        if (last_on_stream[st] != UINT32_MAX && !bsearch(&k, keys, n_explicit, sizeof k, key_cmp))
            rc = b_edge(b, last_on_stream[st], i);
        last_on_stream[st] = i;
    }
    free(keys);
    uint32_t *cnt = rc ? NULL : calloc(n + 1, sizeof *cnt);
    if (!rc && !cnt) rc = ERR_NOMEM;
    r->succ = rc ? NULL : malloc((b->n_edges + 1) * sizeof *r->succ);
    if (!rc && !r->succ) rc = ERR_NOMEM;
    for (size_t i = 0; !rc && i < b->n_edges; i++) {
        r->ops[b->edges[i].from].n_succ++;
        r->ops[b->edges[i].to].pending++;
    }
    for (uint32_t i = 0, acc = 0; !rc && i < n; i++) {
        r->ops[i].succ_first = acc;
        acc += r->ops[i].n_succ;
    }
    for (size_t i = 0; !rc && i < b->n_edges; i++) {
        uint32_t f = b->edges[i].from;
        r->succ[r->ops[f].succ_first + cnt[f]++] = b->edges[i].to;
    }
    r->n_ops = rc ? 0 : n;
    free(cnt);
    free(perm);
    free(pos);
    return rc;
}

/* ---- the launch thread --------------------------------------------------------------------- */

static bool graphs(const exec_t *x) { return x->cfg.cuda_graphs; }

/* Host time to launch op o: its own launch, or with graphs one launch per segment. */
static sim_ps_t launch_cost(const exec_t *x, const xop_t *o)
{
    if (!graphs(x)) return o->op.launch_ps;
    return o->segment_start ? x->cfg.graph_launch_ps : 0;
}

/* The next op of r can be launched now (a host_sync op waits for its predecessors). */
static bool launchable(const run_t *r)
{
    if (r->next_launch >= r->n_ops) return false;
    const xop_t *o = &r->ops[r->next_launch];
    return !o->op.host_sync || o->pending == 0;
}

static void ctx_enqueue(ctx_t *c, run_t *r)
{
    r->in_launch_queue = true;
    r->launch_next = NULL;
    if (c->q_tail) c->q_tail->launch_next = r;
    else c->q_head = r;
    c->q_tail = r;
}

/* The thread goes on with r's next op at once: a host thread issues a step's launches back to back
 * (they are asynchronous) until one must wait for the GPU. */
static void ctx_continue(ctx_t *c, run_t *r)
{
    if (r->in_launch_queue || !launchable(r)) return;
    r->in_launch_queue = true;
    r->launch_next = c->q_head;
    c->q_head = r;
    if (!c->q_tail) c->q_tail = r;
}

static bool batching(const exec_t *x) { return x->cfg.mode == EXEC_LOCKSTEP || x->cfg.mode == EXEC_CONTINUOUS; }

/* The hardware queue of o's stream, -1 when queues are not modelled (host ops included). A stream
 * takes its context's next queue, round robin, when first used, as the driver assigns them to
 * streams as they are created. */
static int op_queue(const run_t *r, const xop_t *o)
{
    exec_t *x = r->x;
    uint32_t h = x->cfg.hw_queues;
    if (!h || batching(x) || o->op.exec == PLAN_EXEC_CPU) return -1;
    sess_t *s = r->members[0];
    if (!s->queue_of) {
        if (!(s->queue_of = malloc(256))) {
            fail(x, ERR_NOMEM, "exec: out of memory");
            return -1;
        }
        memset(s->queue_of, 0xff, 256);
    }
    uint8_t st = x->cfg.one_stream ? 0 : o->op.stream;
    if (s->queue_of[st] < 0) s->queue_of[st] = (int8_t)(r->ctx->streams_made++ % h);
    return s->queue_of[st];
}

static void op_launched(xop_t *o, sim_ps_t now)
{
    o->launched = true;
    o->t_launch = now;
    o->run->next_launch++;
    o->queue = (int8_t)op_queue(o->run, o);
    if (o->queue >= 0) {
        xop_t **tail = &o->run->ctx->hwq_tail[o->queue];
        if (*tail) {
            (*tail)->q_next = o;
            o->q_blocked = true;
        }
        *tail = o;
    }
    op_try_start(o);
}

static void launch_done(sim_t *sim, void *arg)
{
    ctx_t *c = arg;
    run_t *r = c->launching;
    c->launching = NULL;
    op_launched(&r->ops[r->next_launch], sim_now(sim));
    ctx_continue(c, r);
    ctx_kick(c->x, c);
}

/* Serves the context's FIFO of runs: free launches are done at once, costly ones take the thread. */
static void ctx_kick(exec_t *x, ctx_t *c)
{
    while (!c->launching && c->q_head) {
        run_t *r = c->q_head;
        c->q_head = r->launch_next;
        if (!c->q_head) c->q_tail = NULL;
        r->in_launch_queue = false;
        if (!launchable(r)) continue;
        xop_t *o = &r->ops[r->next_launch];
        sim_ps_t cost = launch_cost(x, o);
        if (cost == 0) {
            op_launched(o, sim_now(x->sim));
            ctx_continue(c, r);
            continue;
        }
        err_t e;
        c->launching = r;
        c->busy_ps += cost;
        if (sim_at(x->sim, sim_now(x->sim) + cost, launch_done, c, &e)) {
            fail_err(x, &e);
            return;
        }
    }
}

static void run_kick_launch(run_t *r)
{
    if (!r->in_launch_queue && launchable(r)) {
        ctx_enqueue(r->ctx, r);
        ctx_kick(r->x, r->ctx);
    }
}

/* ---- time slicing between separate processes ------------------------------------------------ */

static bool sliced(const exec_t *x, const xop_t *o) { return x->cfg.mode == EXEC_PROCESSES && o->op.exec != PLAN_EXEC_CPU; }

/* The owner's ops start while no other context waits or its slice lasts. */
static bool gpu_admits(const exec_t *x, const gpu_t *g, const ctx_t *c)
{
    if (g->switching || g->owner != c) return false;
    return g->waits.head >= g->waits.n || sim_now(x->sim) - g->slice_start < g->slice_ps;
}

static void gpu_wait(exec_t *x, gpu_t *g, xop_t *o)
{
    o->waiting_gpu = true;
    if (push_ptr((void ***)&g->waits.ops, &g->waits.n, &g->waits.cap, o)) fail(x, ERR_NOMEM, "exec: out of memory");
}

/* Gives the GPU to c with every op of c waiting for it (collected first: starting one may queue
 * others). An event recorded before a run's first op fires when that op gets the GPU. */
static void gpu_grant(exec_t *x, gpu_t *g, ctx_t *c)
{
    sim_ps_t now = sim_now(x->sim);
    g->owner = g->last_owner = c;
    g->slice_start = now;
    g->slice_ps = x->cfg.timeslice_ps - (c->slice_debt_ps < x->cfg.timeslice_ps ? c->slice_debt_ps : x->cfg.timeslice_ps);
    c->slice_debt_ps = 0;
    gpu_wait_t *w = &g->waits;
    size_t n_go = 0, keep = w->head;
    for (size_t i = w->head; i < w->n; i++) n_go += w->ops[i]->run->ctx == c;
    xop_t **go = malloc((n_go + 1) * sizeof *go);
    if (!go) { fail(x, ERR_NOMEM, "exec: out of memory"); return; }
    n_go = 0;
    for (size_t i = w->head; i < w->n; i++) {
        xop_t *wo = w->ops[i];
        if (wo->run->ctx == c) go[n_go++] = wo;
        else w->ops[keep++] = wo;
    }
    w->n = keep;
    if (w->head >= w->n) w->head = w->n = 0;
    g->owner_running += (uint32_t)n_go;
    for (size_t i = 0; i < n_go; i++) {
        go[i]->waiting_gpu = false;
        x->stats.lost_ps[sim_res_count(x->sim) + EXEC_LOST_TIMESLICE] += (double)(now - go[i]->t_ready);
        if (go[i]->pos == 0) go[i]->run->t_window = now;
        op_start(go[i]);
    }
    free(go);
}

static void switch_done(sim_t *sim, void *arg)
{
    (void)sim;
    gpu_t *g = arg;
    g->switching = false;
    gpu_grant(g->x, g, g->waits.ops[g->waits.head]->run->ctx);
}

/* Passes the idle GPU to c (o, if any, waits with c's other ops): at once when the GPU holds c's
 * state or none yet, else after a context switch. */
static void gpu_pass(exec_t *x, gpu_t *g, ctx_t *c, xop_t *o)
{
    if (o) gpu_wait(x, g, o);
    if (c == g->last_owner || !g->last_owner || x->cfg.ctx_switch_ps == 0) {
        gpu_grant(x, g, c);
        return;
    }
    err_t e;
    g->switching = true;
    if (sim_at(x->sim, sim_now(x->sim) + x->cfg.ctx_switch_ps, switch_done, g, &e)) fail_err(x, &e);
}

/* The owner has no op in flight: the longest-waiting context gets the GPU, if any. The GPU
 * preempts a context at its slice's end; here the op in flight runs on, and what the slice ran
 * past its length comes off the context's next slice, so that its share over slices is the same. */
static void gpu_release(exec_t *x, gpu_t *g)
{
    if (g->owner_running || g->switching || !g->owner) return;
    sim_ps_t used = sim_now(x->sim) - g->slice_start;
    if (g->waits.head < g->waits.n && used > g->slice_ps) g->owner->slice_debt_ps = used - g->slice_ps;
    g->owner = NULL;
    if (g->waits.head < g->waits.n) gpu_pass(x, g, g->waits.ops[g->waits.head]->run->ctx, NULL);
}

/* ---- gathers and kernels taking turns (gathers_exclusive) ----------------------------------- */

/* 1: a kernel; 2: a GPU op whose SMs read host memory; 0: neither (copies, host ops). */
static int excl_kind(const exec_t *x, const xop_t *o)
{
    if (!x->cfg.gathers_exclusive || o->op.exec != PLAN_EXEC_GPU) return 0;
    return o->op.bytes_host > 0 ? 2 : 1;
}

/* Whether o must wait for its turn (the other kind running, or ops ready before it waiting): then
 * it is queued. Else it counts as running. */
static bool turn_wait(xop_t *o)
{
    exec_t *x = o->run->x;
    gpu_t *g = o->run->gpu;
    int k = excl_kind(x, o);
    if (!k) return false;
    bool given = o->turn_given;
    o->turn_given = false;
    if (!given && (g->kind_running[3 - k] || g->turn_waits.head < g->turn_waits.n)) {
        o->t_ready = sim_now(x->sim);
        if (push_ptr((void ***)&g->turn_waits.ops, &g->turn_waits.n, &g->turn_waits.cap, o))
            fail(x, ERR_NOMEM, "exec: out of memory");
        return true;
    }
    g->kind_running[k]++;
    return false;
}

/* Starts the waiting ops, oldest first, while the head's kind may run (re-entered from an op that
 * ends at once: the outer call goes round again). */
static void turns_next(exec_t *x, gpu_t *g)
{
    if (g->in_turns) {
        g->turns_again = true;
        return;
    }
    g->in_turns = true;
    gpu_wait_t *w = &g->turn_waits;
    do {
        g->turns_again = false;
        while (w->head < w->n) {
            xop_t *h = w->ops[w->head];
            if (g->kind_running[3 - excl_kind(x, h)]) break;
            w->head++;
            x->stats.lost_ps[sim_res_count(x->sim) + EXEC_LOST_TURNS] += (double)(sim_now(x->sim) - h->t_ready);
            h->turn_given = true;
            op_start(h);
        }
    } while (g->turns_again);
    if (w->head >= w->n) w->head = w->n = 0;
    g->in_turns = false;
}

/* o is done: with none of its kind left running, the other kind's turn. */
static void turn_done(xop_t *o)
{
    exec_t *x = o->run->x;
    gpu_t *g = o->run->gpu;
    int k = excl_kind(x, o);
    if (k && --g->kind_running[k] == 0) turns_next(x, g);
}

/* ---- running ops ---------------------------------------------------------------------------- */

static void run_complete(run_t *r);

/* The next draw of the jitter's stream (SplitMix64), uniform on (0, 1]. */
static double jitter_uniform(exec_t *x)
{
    uint64_t z = (x->jitter_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return ((double)(z >> 11) + 1.0) * 0x1.0p-53;
}

/* A kernel after a copy-engine op: its start waits for the copy's completion to reach the SMs. */
static bool handoff(const exec_t *x, const xop_t *pred, const xop_t *succ)
{
    return (x->cfg.copy_handoff_ps > 0 || x->cfg.copy_handoff_spread_ps > 0) && plan_handoff(&pred->op, &succ->op);
}

/* One hand-off: its mean, or, with a spread, a uniform draw over mean ± spread/2 (never below 0). */
static sim_ps_t handoff_draw_ps(exec_t *x)
{
    double h = (double)x->cfg.copy_handoff_ps;
    if (x->cfg.copy_handoff_spread_ps > 0) h += (double)x->cfg.copy_handoff_spread_ps * (jitter_uniform(x) - 0.5);
    return h > 0 ? (sim_ps_t)llround(h) : 0;
}

/* One predecessor of s is done (after its hand-off, if any). */
static void dep_done(sim_t *sim, void *arg)
{
    xop_t *s = arg;
    if (--s->pending) return;
    s->t_deps = sim_now(sim);
    op_try_start(s);
    if (s->pos == s->run->next_launch) run_kick_launch(s->run);
}

static void op_finish(xop_t *o)
{
    run_t *r = o->run;
    exec_t *x = r->x;
    o->done = true;
    o->t_end = sim_now(x->sim);
    if (r->traced) {
        if (x->n_timeline == x->cap_timeline) {
            size_t nc = x->cap_timeline ? 2 * x->cap_timeline : 256;
            exec_trace_op_t *nt = realloc(x->timeline, nc * sizeof *nt);
            if (!nt) { fail(x, ERR_NOMEM, "exec: out of memory"); return; }
            x->timeline = nt;
            x->cap_timeline = nc;
        }
        x->timeline[x->n_timeline++] = (exec_trace_op_t){
            .session = o->session, .batch = o->batch, .plan = r->seq, .kind = o->op.kind,
            .layer = o->op.layer, .exec = o->op.exec, .stream = o->op.stream, .gpu = r->gpu->index,
            .t_launch_ps = o->t_launch, .t_start_ps = o->t_start, .t_end_ps = o->t_end,
            .track = o->op.n_uses ? o->op.uses[0].res : -1};
    }
    gpu_t *g = r->gpu;
    bool slice = sliced(x, o);
    if (slice) g->owner_running--;
    for (uint32_t k = 0; k < o->n_succ; k++) {
        xop_t *s = &r->ops[r->succ[o->succ_first + k]];
        err_t e;
        if (handoff(x, o, s)) {
            if (sim_at(x->sim, sim_now(x->sim) + handoff_draw_ps(x), dep_done, s, &e)) fail_err(x, &e);
        } else {
            dep_done(x->sim, s);
        }
    }
    if (slice) gpu_release(x, g);   /* after its successors had their chance within the slice */
    turn_done(o);
    if (++r->n_done == r->n_ops) run_complete(r);
}

static void flow_done(sim_t *sim, void *arg, sim_flow_t *f)
{
    (void)sim;
    (void)f;
    op_finish(arg);
}

static void delay_done(sim_t *sim, void *arg)
{
    (void)sim;
    op_finish(arg);
}

static int op_cost(const xop_t *o, plan_cost_t *c) { return plan_op_cost(&o->op, o->batch, c); }

/* The op's time alone on the idle machine: its latency, then its work at its slowest bound. */
static sim_ps_t op_alone_ps(const exec_t *x, const xop_t *o, const plan_cost_t *c)
{
    double rate = c->cap_rate > 0 ? c->cap_rate : INFINITY;
    for (uint32_t u = 0; u < o->op.n_uses; u++) {
        double cr = sim_res_capacity(x->sim, o->op.uses[u].res) / o->op.uses[u].coef;
        if (cr < rate) rate = cr;
    }
    return c->latency_ps + (c->work > 0 && isfinite(rate) ? s_to_ps(c->work / rate) : 0);
}

/* A draw of the op's jitter, added to its latency (never below 0): s·(E − ln 2), E ~ Exp(1), with
 * s = (abs + rel·t)/ln 50, so that its median is 0 and its p99 the configured spread (of an op moving
 * host bytes, the copy engine's pair or, when its SMs read them, the gathers'). An op with nothing
 * to do alone (a marker) does not vary. */
static void op_jitter(exec_t *x, const xop_t *o, plan_cost_t *c)
{
    bool host = o->op.bytes_host > 0, sm = o->op.exec == PLAN_EXEC_GPU;
    double abs_s = !host ? x->cfg.jitter_abs_s : sm ? x->cfg.jitter_gather_abs_s : x->cfg.jitter_copy_abs_s;
    double rel = !host ? x->cfg.jitter_rel : sm ? x->cfg.jitter_gather_rel : x->cfg.jitter_copy_rel;
    if (!(abs_s > 0 || rel > 0)) return;
    sim_ps_t alone = op_alone_ps(x, o, c);
    if (alone == 0) return;
    double u = jitter_uniform(x);
    double s = (abs_s + rel * ps_to_s(alone)) / log(50.0);
    double lat = ps_to_s(c->latency_ps) + s * (-log(u) - log(2.0));
    c->latency_ps = lat > 0 ? s_to_ps(lat) : 0;
}

static void op_begin_flow(xop_t *o)
{
    exec_t *x = o->run->x;
    o->started = true;
    o->t_start = sim_now(x->sim);
    plan_cost_t c;
    err_t e;
    int rc = op_cost(o, &c);
    if (rc) { fail(x, rc, "exec: an op's cost model failed"); return; }
    op_jitter(x, o, &c);
    if (o->op.n_uses == 0 && c.cap_rate <= 0) {
        if (c.work > 0) { fail(x, ERR_INVAL, "exec: an op moves work over no resource"); return; }
        if (sim_at(x->sim, o->t_start + c.latency_ps, delay_done, o, &e)) fail_err(x, &e);
        return;
    }
    sim_res_t res[PLAN_MAX_USES];
    double coef[PLAN_MAX_USES];
    for (uint32_t u = 0; u < o->op.n_uses; u++) {
        res[u] = o->op.uses[u].res;
        coef[u] = o->op.uses[u].coef;
    }
    sim_flow_spec_t spec = {
        .work = c.work, .cap_rate = c.cap_rate, .weight = o->op.weight > 0 ? o->op.weight : 1.0,
        .latency_ps = c.latency_ps, .n_uses = o->op.n_uses, .res = res, .coef = coef,
        .charge_ps = x->stats.lost_ps, .done = flow_done, .arg = o};
    if (sim_flow_start(x->sim, &spec, NULL, &e)) fail_err(x, &e);
}

/* Starts o's flow (when its turn has come); the op launched after it on its hardware queue may
 * start now. */
static void op_start(xop_t *o)
{
    if (turn_wait(o)) return;
    op_begin_flow(o);
    if (o->queue < 0) return;
    xop_t **tail = &o->run->ctx->hwq_tail[o->queue];
    if (*tail == o) *tail = NULL;
    xop_t *next = o->q_next;
    o->q_next = NULL;
    if (!next) return;
    next->q_blocked = false;
    if (next->pos == 0) next->run->t_window = sim_now(next->run->x->sim);
    op_try_start(next);
}

/* Starts o when it is launched, its predecessors (and stream predecessor) are done, every op
 * launched before it on its hardware queue has started, and — between separate processes — the GPU
 * is not held by another context (host-thread ops are not sliced). */
static void op_try_start(xop_t *o)
{
    if (!o->launched || o->pending || o->started || o->waiting_gpu || o->q_blocked) return;
    run_t *r = o->run;
    exec_t *x = r->x;
    o->t_ready = sim_now(x->sim);
    /* Time an op was held back only by its launch is the launch thread's doing. */
    if (o->t_launch > o->t_deps) x->stats.lost_ps[sim_res_count(x->sim) + EXEC_LOST_LAUNCH] += (double)(o->t_launch - o->t_deps);
    if (sliced(x, o)) {
        gpu_t *g = r->gpu;
        if (!g->owner && !g->switching && g->waits.head >= g->waits.n) {
            gpu_pass(x, g, r->ctx, o);
            return;
        }
        if (!gpu_admits(x, g, r->ctx)) {
            gpu_wait(x, g, o);
            return;
        }
        g->owner_running++;
    }
    op_start(o);
}

/* ---- runs ----------------------------------------------------------------------------------- */

/* Idle-machine latency of the run: each op alone, after its predecessors (stream order included). */
static sim_ps_t run_standalone_ps(const run_t *r)
{
    sim_ps_t *fin = calloc(r->n_ops + 1, sizeof *fin), *start = calloc(r->n_ops + 1, sizeof *start), worst = 0;
    for (uint32_t i = 0; fin && start && i < r->n_ops; i++) {
        const xop_t *o = &r->ops[i];
        plan_cost_t c;
        if (op_cost(o, &c)) continue;
        fin[i] = start[i] + op_alone_ps(r->x, o, &c);
        if (fin[i] > worst) worst = fin[i];
        for (uint32_t k = 0; k < o->n_succ; k++) {
            uint32_t s = r->succ[o->succ_first + k];
            sim_ps_t ready = fin[i] + (handoff(r->x, o, &r->ops[s]) ? r->x->cfg.copy_handoff_ps : 0);
            if (ready > start[s]) start[s] = ready;
        }
    }
    free(start);
    free(fin);
    return worst;
}

static void run_free(run_t *r)
{
    if (!r) return;
    if (r->prev) r->prev->next = r->next;
    else if (r->x && r->x->runs == r) r->x->runs = r->next;
    if (r->next) r->next->prev = r->prev;
    free(r->ops);
    free(r->succ);
    free(r->members);
    free(r);
}

static void sess_plan_done(sess_t *s, sim_ps_t t_begin, sim_ps_t t_window);

static void run_complete(run_t *r)
{
    exec_t *x = r->x;
    sim_ps_t now = sim_now(x->sim);
    x->stats.actual_ps_sum += (double)(now - r->t_begin);
    x->stats.standalone_ps_sum += (double)run_standalone_ps(r);
    gpu_t *g = r->gpu;
    for (uint32_t m = 0; m < r->n_members; m++) sess_plan_done(r->members[m], r->t_begin, r->t_window);
    run_free(r);
    if (batching(x)) {
        g->iterating = false;
        gpu_kick_later(x, g);
    }
}

/* Starts a run of the members' current plans on ctx. */
static int run_start(exec_t *x, gpu_t *g, ctx_t *c, sess_t **members, uint32_t n, err_t *e)
{
    run_t *r = calloc(1, sizeof *r);
    builder_t b = {0};
    int rc = r ? ERR_OK : ERR_NOMEM;
    if (!rc && !(r->members = malloc(n * sizeof *members))) rc = ERR_NOMEM;
    if (!rc) {
        memcpy(r->members, members, n * sizeof *members);
        r->n_members = n;
        r->x = x;
        r->gpu = g;
        r->ctx = c;
        r->t_begin = r->t_window = sim_now(x->sim);
        r->seq = x->plans_started++;
        r->next = x->runs;
        if (x->runs) x->runs->prev = r;
        x->runs = r;
        r->traced = r->seq < x->cfg.timeline_plans;
        rc = build_merged(&b, members, n);
    }
    if (!rc) rc = run_layout(r, &b);
    free(b.ops);
    free(b.edges);
    if (rc) {
        run_free(r);
        return err_set(e, rc, rc == ERR_CYCLE ? "exec: merged plans form a cycle" : "exec: out of memory");
    }
    x->stats.plans += n;
    for (uint32_t i = 0; i < r->n_ops; i++) {
        r->ops[i].segment_start = i == 0 || r->ops[i].op.host_sync;
        r->ops[i].t_deps = r->t_begin;
    }
    if (r->n_ops == 0) {
        run_complete(r);
        return ERR_OK;
    }
    run_kick_launch(r);
    return ERR_OK;
}

/* ---- memory and admission ------------------------------------------------------------------- */

static int sess_footprint(sess_t *s, uint64_t tokens, double *hbm, double *host, err_t *e)
{
    *hbm = *host = 0;
    if (!s->prov.ops->footprint) return ERR_OK;
    return s->prov.ops->footprint(s->prov.self, tokens, hbm, host, e);
}

/* Grows the session's holdings to its footprint at `tokens`; nothing is taken on ERR_CAPACITY. */
static int sess_hold(sess_t *s, uint64_t tokens, err_t *e)
{
    double hbm, host;
    int rc = sess_footprint(s, tokens, &hbm, &host, e);
    if (rc) return rc;
    double d_hbm = hbm > s->hbm_held ? hbm - s->hbm_held : 0, d_host = host > s->host_held ? host - s->host_held : 0;
    if (d_hbm > 0 && (rc = plan_env_alloc(&s->env, true, d_hbm, e))) return rc;
    if (d_host > 0 && (rc = plan_env_alloc(&s->env, false, d_host, e))) {
        plan_env_release(&s->env, true, d_hbm);
        return rc;
    }
    s->hbm_held += d_hbm;
    s->host_held += d_host;
    return ERR_OK;
}

static void sess_release(sess_t *s)
{
    plan_env_release(&s->env, true, s->hbm_held);
    plan_env_release(&s->env, false, s->host_held);
    s->hbm_held = s->host_held = 0;
}

/* A user's next session: the context starts over; growth-mode holdings shrink to the new size
 * (a reservation is kept: it covers the largest session). */
static void sess_restart(sess_t *s, uint64_t tokens)
{
    s->context = tokens;
    if (s->x->cfg.admission == EXEC_ADMIT_RESERVE) return;
    double hbm = 0, host = 0;
    err_t e;
    if (sess_footprint(s, tokens, &hbm, &host, &e)) {
        fail_err(s->x, &e);
        return;
    }
    if (hbm < s->hbm_held) plan_env_release(&s->env, true, s->hbm_held - hbm);
    if (host < s->host_held) plan_env_release(&s->env, false, s->host_held - host);
    if (hbm < s->hbm_held) s->hbm_held = hbm;
    if (host < s->host_held) s->host_held = host;
    mem_kick(s->x, s->gpu);
}

static void sess_finish(sess_t *s, bool evicted)
{
    exec_t *x = s->x;
    s->state = S_DONE;
    sess_release(s);
    if (s->admitted) s->gpu->live--;
    if (evicted) x->stats.evictions++;
    else x->stats.sessions_done++;
    mem_kick(x, s->gpu);
    gpu_kick_later(x, s->gpu);
}

static void sess_wait_mem(sess_t *s)
{
    s->state = S_WAIT_MEM;
    if (push_ptr((void ***)&s->gpu->admitq, &s->gpu->n_admitq, &s->gpu->cap_admitq, s))
        fail(s->x, ERR_NOMEM, "exec: out of memory");
}

static void sess_start_turn(sess_t *s);

/* A running session whose context cannot grow: evicted, or preempted until memory frees. */
static void sess_blocked(sess_t *s)
{
    if (s->x->cfg.admission == EXEC_ADMIT_GROW_EVICT) {
        sess_finish(s, true);
        return;
    }
    s->x->stats.preemptions++;
    s->gpu->waiting_mem++;
    sess_wait_mem(s);
}

/* Admission: reserve takes the final footprint now; grow takes the current one. */
static int sess_try_admit(sess_t *s, err_t *e)
{
    exec_t *x = s->x;
    uint64_t tokens = x->cfg.admission == EXEC_ADMIT_RESERVE ? s->final_tokens : s->context;
    int rc = sess_hold(s, tokens, e);
    if (rc) return rc;
    s->admitted = true;
    s->gpu->live++;
    hist_add(x->stats.admit_wait_s, ps_to_s(sim_now(x->sim) - s->t_arrive));
    return ERR_OK;
}

static uint32_t next_chunk(const sess_t *s)
{
    uint32_t c = s->x->cfg.prefill_chunk;
    return s->prefill_left ? (s->prefill_left < c ? s->prefill_left : c) : 1;
}

/* Retries the sessions waiting for memory on g, in arrival order; those that still do not fit keep
 * their place ahead of any that queue meanwhile. */
static void mem_kick(exec_t *x, gpu_t *g)
{
    if (g->in_mem_kick) {
        g->mem_kick_again = true;
        return;
    }
    g->in_mem_kick = true;
    do {
        g->mem_kick_again = false;
        sess_t **q = g->admitq;
        size_t n = g->n_admitq, keep = 0;
        g->admitq = NULL;
        g->n_admitq = g->cap_admitq = 0;
        for (size_t i = 0; i < n; i++) {
            sess_t *s = q[i];
            err_t e;
            bool was_admitted = s->admitted;
            int rc = was_admitted ? sess_hold(s, s->context + next_chunk(s), &e) : sess_try_admit(s, &e);
            if (rc == ERR_CAPACITY) {
                q[keep++] = s;
                continue;
            }
            if (rc) {
                fail_err(x, &e);
                break;
            }
            if (was_admitted) g->waiting_mem--;
            if (was_admitted) sess_next(s);
            else sess_start_turn(s);
        }
        for (size_t i = 0; i < g->n_admitq; i++) q[keep++] = g->admitq[i]; /* n ≥ keep + these */
        free(g->admitq);
        g->admitq = q;
        g->n_admitq = keep;
        g->cap_admitq = n;
    } while (g->mem_kick_again);
    g->in_mem_kick = false;
}

/* ---- sessions ------------------------------------------------------------------------------- */

static void turn_ready_ev(sim_t *sim, void *arg)
{
    (void)sim;
    sess_start_turn(arg);
}

static void sess_start_turn(sess_t *s)
{
    exec_t *x = s->x;
    if (s->turn >= s->n_turns) {
        sess_finish(s, false);
        return;
    }
    const exec_turn_t *t = &s->turns[s->turn];
    if (t->restart && s->turn > 0) sess_restart(s, t->context_tokens);
    /* A session's first turn was ready when it arrived: waiting for admission is part of its TTFT. */
    s->t_turn_ready = s->turn == 0 && s->plans == 0 ? s->t_arrive : sim_now(x->sim);
    s->prefill_left = t->prefill_tokens;
    s->decode_left = t->decode_tokens;
    s->first_token_done = false;
    sess_next(s);
}

/* Coarse mode: the last coarse plan still stands for this request (same phase and size, context
 * within the reuse fraction). */
static bool coarse_reusable(const sess_t *s)
{
    const exec_config_t *c = &s->x->cfg;
    if (!c->coarse || !s->have_built || s->built.phase != s->req.phase || s->built.new_tokens != s->req.new_tokens)
        return false;
    double ctx = (double)s->req.context_tokens, was = (double)s->built.context_tokens;
    return fabs(ctx - was) <= c->coarse_reuse * was;
}

/* Builds the session's next plan (memory grown first) into s->plan. */
static int sess_build(sess_t *s, err_t *e)
{
    exec_t *x = s->x;
    bool prefill = s->prefill_left > 0;
    uint32_t chunk = next_chunk(s);
    s->req = (plan_request_t){.phase = prefill ? PLAN_PREFILL : PLAN_DECODE, .context_tokens = s->context,
                              .new_tokens = chunk, .step = s->plans};
    if (x->cfg.admission != EXEC_ADMIT_RESERVE) {
        int rc = sess_hold(s, s->context + chunk, e);
        if (rc) return rc;
    }
    if (coarse_reusable(s)) return ERR_OK;
    plan_t *target = x->cfg.coarse ? &s->fine : &s->plan;
    plan_reset(target, s->req.phase, chunk);
    int rc = s->prov.ops->build(s->prov.self, &s->env, &s->req, target, e);
    if (!rc) rc = plan_validate(target, e);
    if (!rc && x->cfg.coarse) rc = plan_coarsen(&s->fine, x->sim, x->cfg.copy_handoff_ps, &s->plan, e);
    s->built = s->req;
    s->have_built = !rc;
    if (rc) return err_prefix(e, "session %llu, plan %llu", (unsigned long long)s->id, (unsigned long long)s->plans);
    return ERR_OK;
}

static void sess_next(sess_t *s)
{
    exec_t *x = s->x;
    if (batching(x)) {
        s->state = S_READY;
        if (push_ptr((void ***)&s->gpu->ready, &s->gpu->n_ready, &s->gpu->cap_ready, s)) {
            fail(x, ERR_NOMEM, "exec: out of memory");
            return;
        }
        gpu_kick_later(x, s->gpu);
        return;
    }
    err_t e;
    int rc = sess_build(s, &e);
    if (rc == ERR_CAPACITY) {
        sess_blocked(s);
        return;
    }
    if (rc) { fail_err(x, &e); return; }
    s->state = S_RUNNING;
    if ((rc = run_start(x, s->gpu, s->ctx, &s, 1, &e))) fail_err(x, &e);
}

/* Batching: starts the GPU's next iteration when it is idle and its batch is ready (lockstep: every
 * admitted session that is not waiting for memory). */
static void gpu_kick_batch(exec_t *x, gpu_t *g)
{
    if (!batching(x) || g->iterating || !g->n_ready) return;
    if (x->cfg.mode == EXEC_LOCKSTEP && g->n_ready < g->live - g->waiting_mem) return;
    uint32_t n = (uint32_t)g->n_ready;
    if (x->cfg.max_batch && n > x->cfg.max_batch) n = x->cfg.max_batch;
    sess_t **taken = malloc(n * sizeof *taken);
    if (!taken) {
        fail(x, ERR_NOMEM, "exec: out of memory");
        return;
    }
    memcpy(taken, g->ready, n * sizeof *taken);
    memmove(g->ready, g->ready + n, (g->n_ready - n) * sizeof *g->ready);
    g->n_ready -= n;
    uint32_t m = 0, blocked = 0;
    for (uint32_t i = 0; i < n; i++) {
        sess_t *s = taken[i];
        err_t e;
        int rc = sess_build(s, &e);
        if (rc && rc != ERR_CAPACITY) {
            free(taken);
            fail_err(x, &e);
            return;
        }
        s->state = rc ? S_WAIT_MEM : S_RUNNING;
        if (rc) taken[n - 1 - blocked++] = s; /* blocked ones collect at the end, members at the front */
        else taken[m++] = s;
    }
    if (m) {
        err_t e;
        g->iterating = true;
        if (run_start(x, g, &x->gpu_ctx[g->index], taken, m, &e)) fail_err(x, &e);
    }
    for (uint32_t i = n - blocked; i < n; i++) sess_blocked(taken[i]);
    free(taken);
}

/* The turn that just ended met the SLO: TTFT, and decode rate after the first token. */
static bool turn_meets_slo(const sess_t *s, sim_ps_t now)
{
    const exec_config_t *c = &s->x->cfg;
    double ttft = ps_to_s(s->t_first_token - s->t_turn_ready);
    uint32_t n = s->turns[s->turn].decode_tokens;
    double rest = ps_to_s(now - s->t_first_token);
    double tps = n > 1 && rest > 0 ? (double)(n - 1) / rest : INFINITY;
    return (c->slo_ttft_s <= 0 || ttft <= c->slo_ttft_s) && (c->slo_turn_tps <= 0 || tps >= c->slo_turn_tps);
}

/* A turn still running at `now`: 1 if it meets the SLO so far, 0 if it has already missed it (no
 * first token within slo_ttft_s, or decoding slower than slo_turn_tps), -1 when it is too early to
 * tell. A session not yet admitted waits in its first turn. */
static int open_turn_slo(const sess_t *s, sim_ps_t now)
{
    const exec_config_t *c = &s->x->cfg;
    if (s->state == S_DONE || s->state == S_THINKING || s->turn >= s->n_turns) return -1;
    sim_ps_t ready = s->admitted ? s->t_turn_ready : s->t_arrive;
    if (!s->first_token_done)
        return c->slo_ttft_s > 0 && ps_to_s(now - ready) > c->slo_ttft_s ? 0 : -1;
    if (c->slo_ttft_s > 0 && ps_to_s(s->t_first_token - ready) > c->slo_ttft_s) return 0;
    uint32_t done = s->turns[s->turn].decode_tokens - s->decode_left;
    double rest = ps_to_s(now - s->t_first_token);
    if (done < 2 || rest <= 0) return -1;
    return c->slo_turn_tps <= 0 || (double)(done - 1) / rest >= c->slo_turn_tps;
}

static void kick_ev(sim_t *sim, void *arg)
{
    (void)sim;
    gpu_t *g = arg;
    g->kick_pending = false;
    gpu_kick_batch(g->x, g);
}

/* Batching: forms the next batch after every other event of this instant, so sessions that become
 * ready at the same time (arrivals, the end of an iteration) join the same iteration. */
static void gpu_kick_later(exec_t *x, gpu_t *g)
{
    err_t e;
    if (g->kick_pending) return;
    g->kick_pending = true;
    if (sim_at(x->sim, sim_now(x->sim), kick_ev, g, &e)) fail_err(x, &e);
}

/* A plan of s begun at t_begin is done; its latency counts from t_window with latency_on_device
 * (the session's time in decode, its tokens/s, from t_begin all the same). */
static void sess_plan_done(sess_t *s, sim_ps_t t_begin, sim_ps_t t_window)
{
    exec_t *x = s->x;
    sim_ps_t now = sim_now(x->sim);
    double dt_s = ps_to_s(now - (x->cfg.latency_on_device ? t_window : t_begin));
    err_t e;
    if (s->prov.ops->completed && s->prov.ops->completed(s->prov.self, &s->env, &s->req, &e)) { fail_err(x, &e); return; }
    s->plans++;
    s->context += s->req.new_tokens;
    if (s->req.phase == PLAN_PREFILL) {
        s->prefill_left -= s->req.new_tokens;
        x->stats.prefill_tokens += s->req.new_tokens;
        hist_add(x->stats.prefill_chunk_s, dt_s);
    } else {
        s->decode_left--;
        s->decoded++;
        s->t_decode_ps += now - t_begin;
        x->stats.decode_tokens++;
        hist_add(x->stats.step_s, dt_s);
        if (x->stats.decode_tokens == 1) x->stats.first_token_s = ps_to_s(now);
        x->stats.last_token_s = ps_to_s(now);
        if (!s->first_token_done) {
            s->first_token_done = true;
            s->t_first_token = now;
            hist_add(x->stats.ttft_s, ps_to_s(now - s->t_turn_ready));
        }
    }
    if (x->cfg.on_plan) x->cfg.on_plan(x->cfg.on_plan_arg, s->id, s->req.phase, s->req.context_tokens, dt_s);
    if (s->prefill_left || s->decode_left) { sess_next(s); return; }
    x->stats.turns_done++;
    if (turn_meets_slo(s, now)) x->stats.turns_slo_ok++;
    s->turn++;
    if (s->turn >= s->n_turns) { sess_finish(s, false); return; }
    const exec_turn_t *t = &s->turns[s->turn];
    sim_ps_t at = s->open_loop && t->arrival_s >= 0 ? s_to_ps(t->arrival_s) : now + s_to_ps(t->think_s);
    if (at < now) at = now;
    s->state = S_THINKING;
    if (sim_at(x->sim, at, turn_ready_ev, s, &e)) fail_err(x, &e);
}

static void sess_admit_first(sess_t *s)
{
    err_t e;
    int rc = sess_try_admit(s, &e);
    if (rc == ERR_CAPACITY) {
        sess_wait_mem(s);
        return;
    }
    if (rc) {
        fail_err(s->x, &e);
        return;
    }
    sess_start_turn(s);
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = (*(sess_t *const *)a)->id, y = (*(sess_t *const *)b)->id;
    return (x > y) - (x < y);
}

/* Sessions arriving at one instant are admitted in session-id order, after every arrival of that
 * instant: results do not depend on the order sessions were listed in. */
static void arrivals_flush(sim_t *sim, void *arg)
{
    (void)sim;
    exec_t *x = arg;
    sess_t **batch = x->arriving;
    size_t n = x->n_arriving;
    x->arriving = NULL;
    x->n_arriving = x->cap_arriving = 0;
    x->arrivals_pending = false;
    qsort(batch, n, sizeof *batch, by_id);
    for (size_t i = 0; i < n; i++) sess_admit_first(batch[i]);
    free(batch);
}

static void sess_arrive(sim_t *sim, void *arg)
{
    sess_t *s = arg;
    exec_t *x = s->x;
    s->t_arrive = sim_now(sim);
    err_t e;
    if (push_ptr((void ***)&x->arriving, &x->n_arriving, &x->cap_arriving, s)) {
        fail(x, ERR_NOMEM, "exec: out of memory");
        return;
    }
    if (x->arrivals_pending) return;
    x->arrivals_pending = true;
    if (sim_at(sim, sim_now(sim), arrivals_flush, x, &e)) fail_err(x, &e);
}

/* ---- public --------------------------------------------------------------------------------- */

int exec_new(sim_t *sim, const exec_config_t *cfg, exec_t **out, err_t *e)
{
    *out = NULL;
    if (cfg->n_gpus < 1 || cfg->n_gpus > 1024) return err_set(e, ERR_INVAL, "exec: %d GPUs", cfg->n_gpus);
    if (cfg->prefill_chunk < 1) return err_set(e, ERR_INVAL, "exec: prefill chunk must be ≥ 1 token");
    if ((int)cfg->mode < EXEC_STREAMS || cfg->mode > EXEC_CONTINUOUS) return err_set(e, ERR_INVAL, "exec: unknown mode");
    if (cfg->graph_launch_ps < 0) return err_set(e, ERR_INVAL, "exec: negative graph launch time");
    if (cfg->copy_handoff_ps < 0 || cfg->copy_handoff_spread_ps < 0) return err_set(e, ERR_INVAL, "exec: negative copy hand-off");
    double j[6] = {cfg->jitter_abs_s, cfg->jitter_rel, cfg->jitter_copy_abs_s, cfg->jitter_copy_rel,
                   cfg->jitter_gather_abs_s, cfg->jitter_gather_rel};
    for (int i = 0; i < 6; i++)
        if (!(j[i] >= 0) || !isfinite(j[i])) return err_set(e, ERR_INVAL, "exec: jitter must be finite and >= 0");
    if (cfg->hw_queues > EXEC_MAX_HW_QUEUES)
        return err_set(e, ERR_INVAL, "exec: %u hardware queues (CUDA allows at most %d)", cfg->hw_queues, EXEC_MAX_HW_QUEUES);
    if (cfg->coarse && (cfg->mode == EXEC_LOCKSTEP || cfg->mode == EXEC_CONTINUOUS))
        return err_set(e, ERR_INVAL, "exec: coarse plans drop merge keys, so they cannot be batched (mode %s)", exec_mode_name(cfg->mode));
    exec_t *x = calloc(1, sizeof *x);
    if (!x) return err_set(e, ERR_NOMEM, "exec: out of memory");
    x->sim = sim;
    x->cfg = *cfg;
    x->jitter_state = cfg->jitter_seed;
    x->gpus = calloc((size_t)cfg->n_gpus, sizeof *x->gpus);
    x->gpu_ctx = calloc((size_t)cfg->n_gpus, sizeof *x->gpu_ctx);
    x->stats.n_lost = sim_res_count(sim) + EXEC_LOST_EXTRA;
    x->stats.lost_ps = calloc(x->stats.n_lost, sizeof *x->stats.lost_ps);
    x->stats.step_s = hist_new();
    x->stats.ttft_s = hist_new();
    x->stats.prefill_chunk_s = hist_new();
    x->stats.admit_wait_s = hist_new();
    x->stats.session_tps = hist_new();
    if (cfg->hbm_pool && (x->hbm_pool = malloc((size_t)cfg->n_gpus * sizeof *x->hbm_pool)))
        memcpy(x->hbm_pool, cfg->hbm_pool, (size_t)cfg->n_gpus * sizeof *x->hbm_pool);
    x->cfg.hbm_pool = x->hbm_pool;
    if (!x->gpus || !x->gpu_ctx || !x->stats.lost_ps || !x->stats.step_s || !x->stats.ttft_s || !x->stats.prefill_chunk_s ||
        !x->stats.admit_wait_s || !x->stats.session_tps || (cfg->hbm_pool && !x->hbm_pool)) {
        exec_free(x);
        return err_set(e, ERR_NOMEM, "exec: out of memory");
    }
    for (int g = 0; g < cfg->n_gpus; g++) {
        x->gpus[g].index = g;
        x->gpus[g].x = x;
        x->gpu_ctx[g].x = x;
    }
    *out = x;
    return ERR_OK;
}

static void sess_free(sess_t *s)
{
    if (s->state != S_DONE) sess_release(s);
    if (s->prov.ops && s->prov.ops->destroy) s->prov.ops->destroy(s->prov.self, &s->env);
    plan_free(&s->plan);
    plan_free(&s->fine);
    free(s->turns);
    free(s->queue_of);
    free(s);
}

void exec_free(exec_t *x)
{
    if (!x) return;
    while (x->runs) run_free(x->runs);
    for (size_t i = 0; i < x->n_sessions; i++) {
        if (!shared_ctx(x, x->sessions[i]->ctx)) free(x->sessions[i]->ctx);
        sess_free(x->sessions[i]);
    }
    free(x->sessions);
    for (int g = 0; x->gpus && g < x->cfg.n_gpus; g++) {
        free(x->gpus[g].waits.ops);
        free(x->gpus[g].turn_waits.ops);
        free(x->gpus[g].ready);
        free(x->gpus[g].admitq);
    }
    free(x->gpus);
    free(x->gpu_ctx);
    free(x->arriving);
    free(x->stats.lost_ps);
    hist_free(x->stats.step_s);
    hist_free(x->stats.ttft_s);
    hist_free(x->stats.prefill_chunk_s);
    hist_free(x->stats.admit_wait_s);
    hist_free(x->stats.session_tps);
    free(x->timeline);
    free(x->hbm_pool);
    free(x);
}

static int spec_check(const exec_t *x, const exec_session_spec_t *spec, err_t *e)
{
    if (spec->gpu < 0 || spec->gpu >= x->cfg.n_gpus)
        return err_set(e, ERR_INVAL, "session %llu: GPU %d of %d", (unsigned long long)spec->id, spec->gpu, x->cfg.n_gpus);
    if (!spec->n_turns) return err_set(e, ERR_INVAL, "session %llu: no turns", (unsigned long long)spec->id);
    if (!spec->provider.ops || !spec->provider.ops->build)
        return err_set(e, ERR_INVAL, "session %llu: no plan provider", (unsigned long long)spec->id);
    if (!(spec->arrival_s >= 0) || !isfinite(spec->arrival_s))
        return err_set(e, ERR_INVAL, "session %llu: arrival %g s", (unsigned long long)spec->id, spec->arrival_s);
    for (size_t i = 0; i < spec->n_turns; i++) {
        const exec_turn_t *t = &spec->turns[i];
        if (!t->decode_tokens)
            return err_set(e, ERR_INVAL, "session %llu turn %zu: no decode tokens", (unsigned long long)spec->id, i);
        if (!(t->think_s >= 0) || !isfinite(t->think_s))
            return err_set(e, ERR_INVAL, "session %llu turn %zu: think time %g s", (unsigned long long)spec->id, i, t->think_s);
    }
    return ERR_OK;
}

int exec_add_session(exec_t *x, const exec_session_spec_t *spec, err_t *e)
{
    int rc = spec_check(x, spec, e);
    sess_t *s = rc ? NULL : calloc(1, sizeof *s);
    if (!rc && !s) rc = err_set(e, ERR_NOMEM, "exec: out of memory");
    if (!rc && !(s->turns = malloc(spec->n_turns * sizeof *s->turns))) rc = err_set(e, ERR_NOMEM, "exec: out of memory");
    bool own_ctx = x->cfg.mode == EXEC_PROCESSES || x->cfg.mode == EXEC_MPS;
    ctx_t *c = rc ? NULL : own_ctx ? calloc(1, sizeof *c) : &x->gpu_ctx[spec->gpu];
    if (c) c->x = x;
    if (!rc && !c) rc = err_set(e, ERR_NOMEM, "exec: out of memory");
    if (!rc && push_ptr((void ***)&x->sessions, &x->n_sessions, &x->cap_sessions, s)) rc = err_set(e, ERR_NOMEM, "exec: out of memory");
    if (rc) {
        if (spec->provider.ops && spec->provider.ops->destroy) {
            plan_env_t env = {x, NULL};
            spec->provider.ops->destroy(spec->provider.self, &env);
        }
        if (s) free(s->turns);
        if (c && !shared_ctx(x, c)) free(c);
        free(s);
        return rc;
    }
    memcpy(s->turns, spec->turns, spec->n_turns * sizeof *s->turns);
    s->x = x;
    s->id = spec->id;
    s->gpu = &x->gpus[spec->gpu];
    s->ctx = c;
    s->prov = spec->provider;
    s->env = (plan_env_t){x, s};
    s->n_turns = spec->n_turns;
    s->open_loop = spec->open_loop;
    s->context = spec->context_tokens;
    s->final_tokens = spec->final_tokens > spec->context_tokens ? spec->final_tokens : spec->context_tokens;
    s->state = S_ARRIVING;
    plan_init(&s->plan);
    plan_init(&s->fine);
    if (sim_at(x->sim, s_to_ps(spec->arrival_s), sess_arrive, s, e)) return e ? e->code : ERR_INVAL;
    return ERR_OK;
}

const exec_stats_t *exec_stats(const exec_t *x)
{
    exec_stats_t *st = (exec_stats_t *)&x->stats;
    /* Rebuilt on each call: sessions still running count with what they decoded so far. */
    hist_t *tps = hist_new();
    for (size_t i = 0; tps && i < x->n_sessions; i++) {
        const sess_t *s = x->sessions[i];
        if (s->decoded && s->t_decode_ps > 0) hist_add(tps, (double)s->decoded / ps_to_s(s->t_decode_ps));
    }
    if (tps) {
        hist_free(st->session_tps);
        st->session_tps = tps;
    }
    st->sessions_waiting = st->open_slo_ok = st->open_slo_missed = 0;
    for (size_t i = 0; i < x->n_sessions; i++) {
        const sess_t *s = x->sessions[i];
        st->sessions_waiting += s->state == S_WAIT_MEM;
        int open = s->state == S_ARRIVING ? -1 : open_turn_slo(s, sim_now(x->sim));
        st->open_slo_ok += open == 1;
        st->open_slo_missed += open == 0;
    }
    bool own = x->cfg.mode == EXEC_PROCESSES || x->cfg.mode == EXEC_MPS;
    st->launch_busy_ps = 0;
    for (int g = 0; !own && g < x->cfg.n_gpus; g++) st->launch_busy_ps += (double)x->gpu_ctx[g].busy_ps;
    st->launch_threads = own ? (uint32_t)x->n_sessions : (uint32_t)x->cfg.n_gpus;
    for (size_t i = 0; i < x->n_sessions; i++)
        if (own) st->launch_busy_ps += (double)x->sessions[i]->ctx->busy_ps;
    return st;
}

const exec_trace_op_t *exec_timeline(const exec_t *x, size_t *n)
{
    *n = x->n_timeline;
    return x->timeline;
}

const char *exec_lost_name(int extra)
{
    static const char *const names[] = {"cap", "launch", "timeslice", "gather-turns"};
    return extra >= 0 && extra < EXEC_LOST_EXTRA ? names[extra] : "?";
}

static const char *const mode_names[] = {"streams", "processes", "mps", "lockstep", "continuous"};

const char *exec_mode_name(exec_mode_t m) { return (unsigned)m <= EXEC_CONTINUOUS ? mode_names[m] : "?"; }

int exec_mode_parse(const char *s)
{
    for (int i = 0; i <= EXEC_CONTINUOUS; i++)
        if (!strcmp(mode_names[i], s)) return i;
    return -1;
}
