/* exec_run — a run: the plans of one step (one session's, or a batch's merged) laid out as ops in
 * issue order with their successor lists, started, and accounted when complete. */
#include "sim/exec_int.h"

#include <stdlib.h>
#include <string.h>

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
            if (found < 0) b->ops[id].member = m;
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
 * lists. A stream is a plan's stream number, the member's own with batch_streams_apart. */
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
    bool apart = r->x->cfg.batch_streams_apart;
    size_t n_streams = 256 * (apart ? r->n_members : 1);
    uint32_t *last_on_stream = rc ? NULL : malloc(n_streams * sizeof *last_on_stream);
    if (!rc && !last_on_stream) rc = ERR_NOMEM;
    if (!rc) memset(last_on_stream, 0xff, n_streams * sizeof *last_on_stream);
    for (uint32_t i = 0; !rc && i < n; i++) {
        r->ops[i] = b->ops[perm[i]];
        r->ops[i].pos = i;
        r->ops[i].run = r;
        size_t st = (r->x->cfg.one_stream ? 0 : r->ops[i].op.stream) + (apart ? 256 * (size_t)r->ops[i].member : 0);
        uint64_t k = edge_key(last_on_stream[st], i);
        if (last_on_stream[st] != UINT32_MAX && !bsearch(&k, keys, n_explicit, sizeof k, key_cmp))
            rc = b_edge(b, last_on_stream[st], i);
        last_on_stream[st] = i;
    }
    free(last_on_stream);
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

/* ---- runs ----------------------------------------------------------------------------------- */

/* Idle-machine latency of the run: each op alone, after its predecessors (stream order included). */
static sim_ps_t run_standalone_ps(const run_t *r)
{
    sim_ps_t *fin = calloc(r->n_ops + 1, sizeof *fin), *start = calloc(r->n_ops + 1, sizeof *start), worst = 0;
    for (uint32_t i = 0; fin && start && i < r->n_ops; i++) {
        const xop_t *o = &r->ops[i];
        plan_cost_t c;
        if (exec_op_cost(o, &c)) continue;
        fin[i] = start[i] + exec_op_alone_ps(r->x, o, &c);
        if (fin[i] > worst) worst = fin[i];
        for (uint32_t k = 0; k < o->n_succ; k++) {
            uint32_t s = r->succ[o->succ_first + k];
            sim_ps_t ready = fin[i] + (exec_handoff(r->x, o, &r->ops[s]) ? r->x->cfg.copy_handoff_ps : 0);
            if (ready > start[s]) start[s] = ready;
        }
    }
    free(start);
    free(fin);
    return worst;
}

void exec_run_free(run_t *r)
{
    if (!r) return;
    exec_run_unqueue(r);
    if (r->prev) r->prev->next = r->next;
    else if (r->x && r->x->runs == r) r->x->runs = r->next;
    if (r->next) r->next->prev = r->prev;
    free(r->ops);
    free(r->succ);
    free(r->members);
    free(r);
}

void exec_run_complete(run_t *r)
{
    exec_t *x = r->x;
    sim_ps_t now = sim_now(x->sim);
    x->stats.actual_ps_sum += (double)(now - r->t_begin);
    x->stats.standalone_ps_sum += (double)run_standalone_ps(r);
    gpu_t *g = r->gpu;
    for (uint32_t m = 0; m < r->n_members; m++) exec_sess_plan_done(r->members[m], r->t_begin, r->t_window);
    exec_run_free(r);
    if (x->pol->run_done) x->pol->run_done(x, g);
}

/* Starts a run of the members' current plans on ctx. */
int exec_run_start(exec_t *x, gpu_t *g, ctx_t *c, sess_t **members, uint32_t n, err_t *e)
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
        r->thread = n == 1 && members[0]->thread ? members[0]->thread : c;
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
        exec_run_free(r);
        return err_set(e, rc, rc == ERR_CYCLE ? "exec: merged plans form a cycle" : "exec: out of memory");
    }
    x->stats.plans += n;
    for (uint32_t i = 0; i < r->n_ops; i++) {
        r->ops[i].segment_start = i == 0 || r->ops[i].op.host_sync;
        r->ops[i].t_deps = r->t_begin;
    }
    if (r->n_ops == 0) {
        exec_run_complete(r);
        return ERR_OK;
    }
    exec_run_kick_launch(r);
    return ERR_OK;
}
