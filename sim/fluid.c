#include "sim/fluid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "sim/hist.h"
#include "sim/sim.h"

#define INLINE_USES 4
#define GROUP_NONE (-2) /* not yet placed (during its first solve) */
#define GROUP_CAP  (-1)

enum { FLOW_FREE, FLOW_RUN, FLOW_DONE };

typedef struct use {
    int32_t res;
    int32_t slot;  /* index in the constraint's flow list */
    double coef;
} use_t;

typedef struct hent {
    double key;    /* virtual finish time */
    uint64_t seq;  /* start order, the tie-break */
    int32_t id;
} hent_t;

typedef struct group {
    hent_t *h;      /* binary min-heap of its flows by key */
    int32_t n, cap;
    double v;       /* virtual clock at t_ps */
    double lambda;  /* dV/dt, per second */
    int64_t t_ps;
    int64_t next_ps; /* earliest finish, rounded up */
} group_t;

typedef struct slot {
    int32_t flow;
    int32_t use;   /* index in the flow's uses */
} slot_t;

typedef struct capent {
    double lambda;  /* cap/weight: the fill level at which the cap binds */
    uint64_t seq;
    int32_t id;
} capent_t;

/* Components are kept as a union-find over constraints, merged when a flow joins two and dissolved when
 * the last flow leaves: a component may be a superset of the true one (solving independent parts
 * together gives the same rates), but never needs a graph search per event. */
typedef struct comp {
    int32_t *members;   /* constraints */
    int32_t nmem, capmem;
    capent_t *capped;   /* its capped flows, sorted by (lambda, seq) */
    int32_t ncap, capcap;
    int32_t nflows;     /* flows crossing it */
} comp_t;

typedef struct res {
    /* what a re-solve's levels read, first: one cache line */
    double capacity;
    double unfixed_w;  /* solve scratch: Σ coef·w over unfixed flows */
    double fixed_use;  /* solve scratch: Σ coef·rate over fixed flows */
    int32_t n_unfixed; /* solve scratch */
    int32_t n, cap;
    double wsum;       /* Σ coef·w over its flows, kept as flows come and go */
    double new_lambda; /* solve scratch */
    double used;
    slot_t *fl;
    hist_tw_t busy, work;
    group_t grp;
    int32_t parent;    /* union-find; the root holds the component */
    comp_t comp;
} res_t;

typedef struct flow {
    double weight, cap, standalone;
    double key;     /* finish on its group's clock */
    double rem;     /* remaining work while in no group */
    double gw;      /* its weight in its group: w, or the cap in the cap group */
    double v_in;    /* group clock and time when it entered its group */
    int64_t t_in_ps;
    double *charge_ps;
    size_t cap_slot;
    void *user;
    uint64_t seq;
    uint64_t mark;
    int32_t state, group, hpos, n_uses;
    int32_t new_group;  /* solve scratch */
    double new_gw;
    use_t inl[INLINE_USES];
    use_t *ext;         /* when n_uses > INLINE_USES */
} flow_t;

struct fluid {
    res_t *res;
    int32_t nres, capres;
    flow_t *fl;
    int32_t nfl, capfl;      /* ids used so far, allocated */
    int32_t *free_ids;
    int32_t nfree;
    group_t capg;
    uint64_t next_seq;
    uint64_t mark;
    int64_t next_ps;
    int next_dirty;
    /* scratch, sized to capres or capfl */
    int32_t *seeds, *live, *act, *fixed, *movers, *done;
};

static inline use_t *uses_of(flow_t *f) { return f->n_uses <= INLINE_USES ? f->inl : f->ext; }

static inline group_t *grp(fluid_t *fl, int32_t g) { return g == GROUP_CAP ? &fl->capg : &fl->res[g].grp; }

static inline const group_t *grp_c(const fluid_t *fl, int32_t g)
{
    return g == GROUP_CAP ? &fl->capg : &fl->res[g].grp;
}

static void grp_advance(group_t *g, int64_t now_ps)
{
    if (now_ps == g->t_ps) return;
    g->v += g->lambda * (double)(now_ps - g->t_ps) / (double)SIM_PS_PER_S;
    g->t_ps = now_ps;
}

static void grp_update_next(group_t *g)
{
    if (!g->n || !(g->lambda > 0)) {
        g->next_ps = SIM_TIME_NEVER;
        return;
    }
    double s = (g->h[0].key - g->v) / g->lambda;
    g->next_ps = sim_ps_add(g->t_ps, s > 0 ? sim_ps_or_never(s) : 0);
}

/* ---- per-group indexed heap ---------------------------------------------------------------- */

static inline int hless(const hent_t *a, const hent_t *b)
{
    return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

static inline void hset(fluid_t *fl, group_t *g, int32_t i, hent_t e)
{
    g->h[i] = e;
    fl->fl[e.id].hpos = i;
}

static void sift_up(fluid_t *fl, group_t *g, int32_t i)
{
    hent_t e = g->h[i];
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!hless(&e, &g->h[p])) break;
        hset(fl, g, i, g->h[p]);
        i = p;
    }
    hset(fl, g, i, e);
}

static void sift_down(fluid_t *fl, group_t *g, int32_t i)
{
    hent_t e = g->h[i];
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= g->n) break;
        if (c + 1 < g->n && hless(&g->h[c + 1], &g->h[c])) c++;
        if (!hless(&g->h[c], &e)) break;
        hset(fl, g, i, g->h[c]);
        i = c;
    }
    hset(fl, g, i, e);
}

static int h_push(fluid_t *fl, group_t *g, int32_t id, double key)
{
    if (g->n == g->cap) {
        int32_t cap = g->cap ? 2 * g->cap : 8;
        hent_t *h = realloc(g->h, (size_t)cap * sizeof *h);
        if (!h) return ERR_NOMEM;
        g->h = h;
        g->cap = cap;
    }
    g->h[g->n] = (hent_t){key, fl->fl[id].seq, id};
    sift_up(fl, g, g->n++);
    return 0;
}

static void h_remove(fluid_t *fl, group_t *g, int32_t pos)
{
    hent_t last = g->h[--g->n];
    if (pos < g->n) {
        hset(fl, g, pos, last);
        sift_up(fl, g, pos);
        sift_down(fl, g, fl->fl[last.id].hpos);
    }
    /* An empty group restarts its clock at zero, so virtual times stay small and precise. */
    if (!g->n) g->v = 0;
}

/* ---- groups: entering, leaving, accounting ------------------------------------------------- */

/* Takes f out of its group (whose clock is at now_ps), charges its lost time, returns its remaining work. */
static double leave(fluid_t *fl, flow_t *f, int64_t now_ps)
{
    group_t *g = grp(fl, f->group);
    double rem = (f->key - g->v) * f->gw;
    if (f->charge_ps) {
        double lost_ps = (double)(now_ps - f->t_in_ps)
                         - f->gw * (g->v - f->v_in) / f->standalone * (double)SIM_PS_PER_S;
        f->charge_ps[f->group == GROUP_CAP ? f->cap_slot : (size_t)f->group] += lost_ps;
    }
    h_remove(fl, g, f->hpos);
    f->group = GROUP_NONE;
    return rem > 0 ? rem : 0;
}

static int enter(fluid_t *fl, int32_t id, int32_t gi, double gw, double rem, int64_t now_ps)
{
    flow_t *f = &fl->fl[id];
    group_t *g = grp(fl, gi);
    f->group = gi;
    f->gw = gw;
    f->v_in = g->v;
    f->t_in_ps = now_ps;
    f->key = g->v + rem / gw;
    return h_push(fl, g, id, f->key);
}

/* ---- components ---------------------------------------------------------------------------- */

static int32_t find(fluid_t *fl, int32_t r)
{
    while (fl->res[r].parent != r) {
        fl->res[r].parent = fl->res[fl->res[r].parent].parent;  /* path halving */
        r = fl->res[r].parent;
    }
    return r;
}

static int cmp_capent(const void *a, const void *b)
{
    const capent_t *x = a, *y = b;
    if (x->lambda != y->lambda) return x->lambda < y->lambda ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Grows *p (of *cap elements of size) to hold at least n; 0 or ERR_NOMEM. */
static int reserve32(void **p, int32_t *cap, int32_t n, size_t size)
{
    if (n <= *cap) return 0;
    int32_t c = *cap ? *cap : 4;
    while (c < n) c *= 2;
    void *np = realloc(*p, (size_t)c * size);
    if (!np) return ERR_NOMEM;
    *p = np;
    *cap = c;
    return 0;
}

/* Merges the components rooted at a and b; returns the new root, or -1 when out of memory. */
static int32_t unite(fluid_t *fl, int32_t a, int32_t b)
{
    if (a == b) return a;
    if (fl->res[a].comp.nmem < fl->res[b].comp.nmem) {
        int32_t t = a;
        a = b;
        b = t;
    }
    comp_t *A = &fl->res[a].comp, *B = &fl->res[b].comp;
    if (reserve32((void **)&A->members, &A->capmem, A->nmem + B->nmem, sizeof *A->members) ||
        reserve32((void **)&A->capped, &A->capcap, A->ncap + B->ncap, sizeof *A->capped))
        return -1;
    memcpy(A->members + A->nmem, B->members, (size_t)B->nmem * sizeof *B->members);
    A->nmem += B->nmem;
    if (B->ncap) {
        memcpy(A->capped + A->ncap, B->capped, (size_t)B->ncap * sizeof *B->capped);
        A->ncap += B->ncap;
        qsort(A->capped, (size_t)A->ncap, sizeof *A->capped, cmp_capent);
    }
    A->nflows += B->nflows;
    B->nmem = B->ncap = B->nflows = 0;
    fl->res[b].parent = a;
    return a;
}

/* Splits an empty component back into single constraints, all idle from now_ps. */
static void dissolve(fluid_t *fl, int32_t root, int64_t now_ps)
{
    comp_t *C = &fl->res[root].comp;
    for (int32_t k = 0; k < C->nmem; k++) {
        res_t *R = &fl->res[C->members[k]];
        R->parent = C->members[k];
        R->used = 0;
        R->grp.lambda = 0;
        R->grp.next_ps = SIM_TIME_NEVER;
        hist_tw_set(&R->busy, now_ps, 0);
        hist_tw_set(&R->work, now_ps, 0);
        if (C->members[k] != root) {
            R->comp.members[0] = C->members[k];
            R->comp.nmem = 1;
        }
    }
    C->members[0] = root;
    C->nmem = 1;
    C->ncap = 0;
    fl->next_dirty = 1;
}

static int32_t capped_find(const comp_t *C, const capent_t *key)
{
    int32_t lo = 0, hi = C->ncap;
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (cmp_capent(&C->capped[mid], key) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* ---- the solver ---------------------------------------------------------------------------- */

/* Fixes flow f at a rate now (explicitly, recorded for the apply step). */
static void fix(fluid_t *fl, flow_t *f, uint64_t m, int32_t gi, double rate, double gw, int32_t *nfixed)
{
    f->mark = m;
    f->new_group = gi;
    f->new_gw = gw;
    fl->fixed[(*nfixed)++] = (int32_t)(f - fl->fl);
    use_t *u = uses_of(f);
    for (int32_t k = 0; k < f->n_uses; k++) {
        res_t *R = &fl->res[u[k].res];
        R->unfixed_w -= u[k].coef * f->weight;
        R->n_unfixed--;
        R->fixed_use += u[k].coef * rate;
    }
}

/* Moves flow id to group gi (weight gw there) at now_ps, if it is not there already. */
static int move(fluid_t *fl, int32_t id, int32_t gi, double gw, int64_t now_ps)
{
    flow_t *f = &fl->fl[id];
    if (f->group == gi && f->gw == gw) return 0;
    double rem = f->group == GROUP_NONE ? f->rem : leave(fl, f, now_ps);
    return enter(fl, id, gi, gw, rem, now_ps);
}

/* Re-solves the component rooted at root, at now_ps.
 *
 * Progressive filling over the component's constraints, starting from the kept sums; caps are met in
 * their sorted order. Flows fixed before the last level are fixed one by one. The last level, where
 * one constraint b holds every flow still unfixed, fixes them all at once without visiting them:
 * those already in b's group stay, and the only ones to move are the unfixed members of other groups
 * (and the cap group), found by walking those groups. So an event costs O(constraints + capped flows +
 * flows that change group) when one constraint binds everything, as for flows in series. new_id is a
 * flow just added (not in any group yet), or -1. */
static int solve(fluid_t *fl, int32_t root, int32_t new_id, int64_t now_ps)
{
    uint64_t m = ++fl->mark;
    comp_t *C = &fl->res[root].comp;
    /* live: the members some flow crosses, in member order (ties between levels go to the first);
     * act: those of them with unfixed flows, compacted as levels fix them. The others hold no flow
     * (wsum exactly 0) and only take part in the apply step. */
    int32_t *live = fl->live, *act = fl->act, nlive = 0;
    for (int32_t k = 0; k < C->nmem; k++) {
        res_t *R = &fl->res[C->members[k]];
        R->unfixed_w = R->wsum;
        R->fixed_use = 0;
        R->n_unfixed = R->n;
        R->new_lambda = 0;
        if (R->n) live[nlive++] = C->members[k];
    }
    memcpy(act, live, (size_t)nlive * sizeof *act);
    int32_t nact = nlive;
    int32_t left = C->nflows, nfixed = 0, ci = 0, last = -1;
    for (;;) {
        int32_t b = -1, kept = 0;
        double lb = INFINITY;
        for (int32_t k = 0; k < nact; k++) {
            res_t *R = &fl->res[act[k]];
            if (!R->n_unfixed) continue;
            act[kept++] = act[k];
            double room = R->capacity - R->fixed_use;
            double lam = (room > 0 ? room : 0) / R->unfixed_w;
            if (lam < lb) {
                lb = lam;
                b = act[k];
            }
        }
        nact = kept;
        /* Fixing a flow at a cap level ≤ lb can only raise every constraint's level, so all caps up to
         * lb are fixed before the levels are computed again. */
        int capped_any = 0;
        for (; ci < C->ncap && C->capped[ci].lambda <= lb; ci++) {
            flow_t *f = &fl->fl[C->capped[ci].id];
            if (f->mark == m) continue;
            fix(fl, f, m, GROUP_CAP, f->cap, f->cap, &nfixed);
            left--;
            capped_any = 1;
        }
        if (capped_any) continue;
        if (b < 0) break;
        res_t *B = &fl->res[b];
        B->new_lambda = lb;
        if (B->n_unfixed == left) {
            /* The last level: every unfixed flow crosses b and runs at w·lb (members no flow crosses
             * would add lb·0). */
            for (int32_t k = 0; k < nlive; k++) {
                res_t *R = &fl->res[live[k]];
                R->fixed_use += lb * R->unfixed_w;
            }
            last = b;
            break;
        }
        for (int32_t k = 0; k < B->n; k++) {
            flow_t *f = &fl->fl[B->fl[k].flow];
            if (f->mark != m) {
                fix(fl, f, m, b, f->weight * lb, f->weight, &nfixed);
                left--;
            }
        }
    }

    /* Apply: clocks to now under the old rates, then move only the flows whose group changed. */
    /* A member no flow crosses has an empty group left at rate 0: its clock needs no advance. */
    for (int32_t k = 0; k < nlive; k++) grp_advance(&fl->res[live[k]].grp, now_ps);
    for (int32_t k = 0; k < C->nmem; k++) {
        res_t *R = &fl->res[C->members[k]];
        if (!R->n && R->grp.lambda != 0) grp_advance(&R->grp, now_ps);
    }
    grp_advance(&fl->capg, now_ps);
    int32_t nmov = 0;
    if (last >= 0) {
        /* Unfixed flows outside b's group: members of other groups, capped flows no longer capped, and
         * and the flow just added. Listed first: moving edits the heaps. */
        for (int32_t k = 0; k < C->nmem; k++) {
            group_t *g = &fl->res[C->members[k]].grp;
            if (C->members[k] == last) continue;
            for (int32_t i = 0; i < g->n; i++)
                if (fl->fl[g->h[i].id].mark != m) fl->movers[nmov++] = g->h[i].id;
        }
        for (int32_t i = ci; i < C->ncap; i++) {  /* those before ci are all fixed */
            flow_t *f = &fl->fl[C->capped[i].id];
            if (f->mark != m && f->group == GROUP_CAP) fl->movers[nmov++] = C->capped[i].id;
        }
        if (new_id >= 0 && fl->fl[new_id].mark != m) fl->movers[nmov++] = new_id;
    }
    for (int32_t i = 0; i < nfixed; i++) {
        flow_t *f = &fl->fl[fl->fixed[i]];
        int rc = move(fl, fl->fixed[i], f->new_group, f->new_gw, now_ps);
        if (rc) return rc;
    }
    for (int32_t i = 0; i < nmov; i++) {
        int rc = move(fl, fl->movers[i], last, fl->fl[fl->movers[i]].weight, now_ps);
        if (rc) return rc;
    }
    for (int32_t k = 0; k < C->nmem; k++) {
        res_t *R = &fl->res[C->members[k]];
        /* A member no flow crosses, already idle and at zero, would only be set to zero again. */
        if (!R->n && R->grp.lambda == 0 && R->used == 0 && R->busy.value == 0 && R->work.value == 0 &&
            R->grp.next_ps == SIM_TIME_NEVER)
            continue;
        R->grp.lambda = R->grp.n ? R->new_lambda : 0;
        grp_update_next(&R->grp);
        R->used = R->fixed_use;
        hist_tw_set(&R->busy, now_ps, R->used / R->capacity);
        hist_tw_set(&R->work, now_ps, R->used);
    }
    grp_update_next(&fl->capg);
    fl->next_dirty = 1;
    return 0;
}

/* ---- public API ---------------------------------------------------------------------------- */

fluid_t *fluid_new(void)
{
    fluid_t *fl = calloc(1, sizeof *fl);
    if (!fl) return NULL;
    fl->capg.lambda = 1.0;  /* the cap group's clock is real time in seconds */
    fl->capg.next_ps = SIM_TIME_NEVER;
    fl->next_ps = SIM_TIME_NEVER;
    return fl;
}

void fluid_free(fluid_t *fl)
{
    if (!fl) return;
    for (int32_t r = 0; r < fl->nres; r++) {
        free(fl->res[r].fl);
        free(fl->res[r].grp.h);
        free(fl->res[r].comp.members);
        free(fl->res[r].comp.capped);
    }
    for (int32_t i = 0; i < fl->nfl; i++) free(fl->fl[i].ext);
    free(fl->capg.h);
    free(fl->res);
    free(fl->fl);
    free(fl->free_ids);
    free(fl->seeds);
    free(fl->live);
    free(fl->act);
    free(fl->fixed);
    free(fl->movers);
    free(fl->done);
    free(fl);
}

static int grow(void **p, size_t n, size_t size)
{
    void *np = realloc(*p, n * size);
    if (!np) return ERR_NOMEM;
    *p = np;
    return 0;
}

int fluid_res_add(fluid_t *fl, double capacity, int32_t *out)
{
    if (fl->nres == fl->capres) {
        int32_t cap = fl->capres ? 2 * fl->capres : 16;
        if (grow((void **)&fl->res, (size_t)cap, sizeof *fl->res) ||
            grow((void **)&fl->seeds, (size_t)cap, sizeof *fl->seeds) ||
            grow((void **)&fl->live, (size_t)cap, sizeof *fl->live) ||
            grow((void **)&fl->act, (size_t)cap, sizeof *fl->act))
            return ERR_NOMEM;
        fl->capres = cap;
    }
    res_t *R = &fl->res[fl->nres];
    memset(R, 0, sizeof *R);
    if (reserve32((void **)&R->comp.members, &R->comp.capmem, 1, sizeof *R->comp.members)) return ERR_NOMEM;
    R->comp.members[0] = fl->nres;
    R->comp.nmem = 1;
    R->parent = fl->nres;
    R->capacity = capacity;
    R->grp.next_ps = SIM_TIME_NEVER;
    *out = fl->nres++;
    return 0;
}

int fluid_res_set_capacity(fluid_t *fl, int32_t r, double capacity, int64_t now_ps)
{
    fl->res[r].capacity = capacity;
    return solve(fl, find(fl, r), -1, now_ps);
}

double fluid_res_capacity(const fluid_t *fl, int32_t r) { return fl->res[r].capacity; }
double fluid_res_used(const fluid_t *fl, int32_t r) { return fl->res[r].used; }

double fluid_res_busy_ps(const fluid_t *fl, int32_t r, int64_t now_ps)
{
    return hist_tw_integral(&fl->res[r].busy, now_ps);
}

double fluid_res_work_ps(const fluid_t *fl, int32_t r, int64_t now_ps)
{
    return hist_tw_integral(&fl->res[r].work, now_ps);
}

static int new_id(fluid_t *fl, int32_t *out)
{
    if (fl->nfree) {
        *out = fl->free_ids[--fl->nfree];
        return 0;
    }
    if (fl->nfl == fl->capfl) {
        int32_t cap = fl->capfl ? 2 * fl->capfl : 64;
        if (grow((void **)&fl->fl, (size_t)cap, sizeof *fl->fl) ||
            grow((void **)&fl->free_ids, (size_t)cap, sizeof *fl->free_ids) ||
            grow((void **)&fl->fixed, (size_t)cap, sizeof *fl->fixed) ||
            grow((void **)&fl->movers, (size_t)cap, sizeof *fl->movers) ||
            grow((void **)&fl->done, (size_t)cap, sizeof *fl->done))
            return ERR_NOMEM;
        fl->capfl = cap;
    }
    fl->fl[fl->nfl].ext = NULL;
    *out = fl->nfl++;
    return 0;
}

static void free_id(fluid_t *fl, int32_t id)
{
    flow_t *f = &fl->fl[id];
    free(f->ext);
    f->ext = NULL;
    f->state = FLOW_FREE;
    fl->free_ids[fl->nfree++] = id;
}

/* Unlinks f from its constraints and its component, appending the component's root to fl->seeds
 * (once; the component is dissolved instead when f was its last flow). */
static void unlink_flow(fluid_t *fl, flow_t *f, int64_t now_ps, int32_t *nseeds)
{
    use_t *u = uses_of(f);
    if (!f->n_uses) return;
    int32_t root = find(fl, u[0].res);
    for (int32_t k = 0; k < f->n_uses; k++) {
        res_t *R = &fl->res[u[k].res];
        slot_t last = R->fl[--R->n];
        if (u[k].slot < R->n) {
            R->fl[u[k].slot] = last;
            uses_of(&fl->fl[last.flow])[last.use].slot = u[k].slot;
        }
        /* Exact zero when idle, so rounding in the kept sum cannot outlive its flows. */
        R->wsum = R->n ? R->wsum - u[k].coef * f->weight : 0;
    }
    comp_t *C = &fl->res[root].comp;
    if (f->cap > 0) {
        capent_t key = {f->cap / f->weight, f->seq, 0};
        int32_t at = capped_find(C, &key);
        memmove(C->capped + at, C->capped + at + 1, (size_t)(C->ncap - at - 1) * sizeof *C->capped);
        C->ncap--;
    }
    if (--C->nflows == 0) {
        dissolve(fl, root, now_ps);
        return;
    }
    for (int32_t s = 0; s < *nseeds; s++)
        if (fl->seeds[s] == root) return;
    fl->seeds[(*nseeds)++] = root;
}

int fluid_flow_add(fluid_t *fl, int64_t now_ps, const fluid_flow_req_t *req, int32_t *out)
{
    int32_t id;
    if (new_id(fl, &id)) return ERR_NOMEM;
    flow_t *f = &fl->fl[id];
    int32_t n = (int32_t)req->n_uses;
    use_t *ext = NULL;
    if (n > INLINE_USES && !(ext = malloc((size_t)n * sizeof *ext))) {
        fl->free_ids[fl->nfree++] = id;
        return ERR_NOMEM;
    }
    /* Make room in every constraint's list first, so nothing fails half-linked. */
    for (int32_t k = 0; k < n; k++) {
        res_t *R = &fl->res[req->res[k]];
        if (R->n == R->cap) {
            int32_t cap = R->cap ? 2 * R->cap : 8;
            if (grow((void **)&R->fl, (size_t)cap, sizeof *R->fl)) {
                free(ext);
                fl->free_ids[fl->nfree++] = id;
                return ERR_NOMEM;
            }
            R->cap = cap;
        }
    }
    memset(f, 0, sizeof *f);
    f->ext = ext;
    f->n_uses = n;
    f->weight = req->weight;
    f->cap = req->cap_rate;
    f->rem = req->work;
    f->charge_ps = req->charge_ps;
    f->cap_slot = req->cap_slot;
    f->user = req->user;
    f->seq = fl->next_seq++;
    f->state = FLOW_RUN;
    f->group = GROUP_NONE;
    f->mark = fl->mark;
    double s = f->cap > 0 ? f->cap : INFINITY;
    use_t *u = uses_of(f);
    int32_t root = n ? find(fl, req->res[0]) : -1;
    for (int32_t k = 0; k < n; k++) {
        res_t *R = &fl->res[req->res[k]];
        u[k] = (use_t){req->res[k], R->n, req->coef[k]};
        R->fl[R->n++] = (slot_t){id, k};
        R->wsum += req->coef[k] * f->weight;
        if (R->capacity / req->coef[k] < s) s = R->capacity / req->coef[k];
        if ((root = unite(fl, root, find(fl, req->res[k]))) < 0) return ERR_NOMEM;
    }
    f->standalone = s;
    *out = id;
    if (n) {
        comp_t *C = &fl->res[root].comp;
        C->nflows++;
        if (f->cap > 0) {
            capent_t e = {f->cap / f->weight, f->seq, id};
            if (reserve32((void **)&C->capped, &C->capcap, C->ncap + 1, sizeof *C->capped)) return ERR_NOMEM;
            int32_t at = capped_find(C, &e);
            memmove(C->capped + at + 1, C->capped + at, (size_t)(C->ncap - at) * sizeof *C->capped);
            C->capped[at] = e;
            C->ncap++;
        }
        return solve(fl, root, id, now_ps);
    }
    grp_advance(&fl->capg, now_ps);
    int rc = enter(fl, id, GROUP_CAP, f->cap, f->rem, now_ps);
    grp_update_next(&fl->capg);
    fl->next_dirty = 1;
    return rc;
}

int fluid_flow_remove(fluid_t *fl, int32_t id, int64_t now_ps)
{
    flow_t *f = &fl->fl[id];
    group_t *g = grp(fl, f->group);
    grp_advance(g, now_ps);
    leave(fl, f, now_ps);
    grp_update_next(g);
    fl->next_dirty = 1;
    int32_t nseeds = 0;
    unlink_flow(fl, f, now_ps, &nseeds);
    free_id(fl, id);
    return nseeds ? solve(fl, fl->seeds[0], -1, now_ps) : 0;
}

int64_t fluid_next_ps(fluid_t *fl)
{
    if (fl->next_dirty) {
        int64_t t = fl->capg.next_ps;
        for (int32_t r = 0; r < fl->nres; r++)
            if (fl->res[r].grp.next_ps < t) t = fl->res[r].grp.next_ps;
        fl->next_ps = t;
        fl->next_dirty = 0;
    }
    return fl->next_ps;
}


/* Takes the done flows of group g (its next completion is due) into fl->done. */
static void collect_group(fluid_t *fl, group_t *g, int64_t now_ps, int32_t *nd)
{
    grp_advance(g, now_ps);
    while (g->n) {
        flow_t *f = &fl->fl[g->h[0].id];
        grp_update_next(g);
        if ((f->key - g->v) * f->gw >= SIM_WORK_EPSILON && g->next_ps > now_ps) break;
        leave(fl, f, now_ps);
        f->state = FLOW_DONE;
        fl->done[(*nd)++] = (int32_t)(f - fl->fl);
    }
    grp_update_next(g);
}

int fluid_collect_done(fluid_t *fl, int64_t now_ps, const int32_t **ids, size_t *n)
{
    int32_t nd = 0;
    if (fl->capg.next_ps <= now_ps) collect_group(fl, &fl->capg, now_ps, &nd);
    for (int32_t r = 0; r < fl->nres; r++)
        if (fl->res[r].grp.next_ps <= now_ps) collect_group(fl, &fl->res[r].grp, now_ps, &nd);
    fl->next_dirty = 1;
    *ids = fl->done;
    *n = (size_t)nd;
    if (!nd) return 0;
    /* Report in start order; flows are few per instant, so insertion sort. */
    for (int32_t i = 1; i < nd; i++) {
        int32_t id = fl->done[i], j = i;
        while (j > 0 && fl->fl[fl->done[j - 1]].seq > fl->fl[id].seq) {
            fl->done[j] = fl->done[j - 1];
            j--;
        }
        fl->done[j] = id;
    }
    int32_t nseeds = 0;
    for (int32_t i = 0; i < nd; i++) unlink_flow(fl, &fl->fl[fl->done[i]], now_ps, &nseeds);
    for (int32_t k = 0; k < nseeds; k++) {
        int rc = solve(fl, fl->seeds[k], -1, now_ps);
        if (rc) return rc;
    }
    return 0;
}

void fluid_flow_release(fluid_t *fl, int32_t id) { free_id(fl, id); }

double fluid_flow_rate(const fluid_t *fl, int32_t id)
{
    const flow_t *f = &fl->fl[id];
    if (f->state != FLOW_RUN) return 0;
    return f->gw * grp_c(fl, f->group)->lambda;
}

double fluid_flow_remaining(const fluid_t *fl, int32_t id, int64_t now_ps)
{
    const flow_t *f = &fl->fl[id];
    if (f->state != FLOW_RUN) return 0;
    const group_t *g = grp_c(fl, f->group);
    double v = g->v + g->lambda * (double)(now_ps - g->t_ps) / (double)SIM_PS_PER_S;
    double rem = (f->key - v) * f->gw;
    return rem > 0 ? rem : 0;
}

double fluid_flow_standalone(const fluid_t *fl, int32_t id) { return fl->fl[id].standalone; }

int32_t fluid_flow_bottleneck(const fluid_t *fl, int32_t id)
{
    const flow_t *f = &fl->fl[id];
    return f->state == FLOW_RUN && f->group >= 0 ? f->group : -1;
}

void *fluid_flow_user(const fluid_t *fl, int32_t id) { return fl->fl[id].user; }
