/* fluid components and the solver: which constraints are solved together, progressive filling over
 * them, and applying its result. See fluid.h for the model.
 *
 * Coupling. A constraint is a member of a component (a union-find over constraints) or passive. A
 * passive constraint joins no component: each component solves as if it were absent, counting only
 * its own usage there (its share, kept per component). After a fill, when the shares of all the
 * components crossing a passive constraint sum past BIND_SHARE of its capacity, it is promoted: it and
 * every component crossing it merge, and the merged component is filled again before anything is
 * applied. Below that it binds nobody: progressive filling only raises usage as the level rises, so a
 * constraint whose final usage is under its capacity never saturates during the fill, and leaving it
 * out gives the same levels, bottlenecks and rates bit for bit (each component's levels read only its
 * own flows' sums, in the same order).
 *
 * Candidates: every constraint starts passive; it becomes a member when it binds, or as the anchor of
 * a flow none of whose constraints is a member yet (the flow's tightest constraint, capacity/coef,
 * ties to the lowest id, which is where it most likely binds). So a GPU's kernels and transfers form
 * its component, while host DRAM and a switch's uplinks (crossed by every GPU under them, and
 * normally below capacity) stay passive and couple nothing. Members turn passive again when their
 * component empties (merging when it binds, splitting lazily). */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "sim/fluid_int.h"

/* Rounding in the usage sums is ~1e-15 relative; promoting a little early is always exact. */
#define BIND_SHARE (1.0 - 1e-9)

static int32_t find(fluid_t *fl, int32_t r)
{
    assert(fl->res[r].parent != PASSIVE);
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

/* ---- passive constraints ------------------------------------------------------------------- */

static user_t *user_of(res_t *P, int32_t root)
{
    for (int32_t i = 0; i < P->nusers; i++)
        if (P->users[i].root == root) return &P->users[i];
    return NULL;
}

static void user_drop(res_t *P, int32_t root)
{
    user_t *u = user_of(P, root);
    assert(u);
    int32_t at = (int32_t)(u - P->users);
    memmove(P->users + at, P->users + at + 1, (size_t)(P->nusers - at - 1) * sizeof *P->users);
    P->nusers--;
}

static pas_t *pas_of(comp_t *C, int32_t r)
{
    for (int32_t i = 0; i < C->npas; i++)
        if (C->pas[i].res == r) return &C->pas[i];
    return NULL;
}

static void pas_drop(comp_t *C, pas_t *e)
{
    int32_t at = (int32_t)(e - C->pas);
    memmove(C->pas + at, C->pas + at + 1, (size_t)(C->npas - at - 1) * sizeof *C->pas);
    C->npas--;
}

/* Sets R's usage from now_ps on; its integrals change only when it does (a capacity change updates
 * the busy share itself). */
static inline void set_used(res_t *R, double used, int64_t now_ps)
{
    if (used == R->used) return;
    R->used = used;
    hist_tw_set(&R->busy, now_ps, used / R->capacity);
    hist_tw_set(&R->work, now_ps, used);
}

/* A passive constraint's usage: the sum of its users' shares (exactly 0 with none). */
static double pas_total(const res_t *P)
{
    double u = 0;
    for (int32_t i = 0; i < P->nusers; i++) u += P->users[i].contrib;
    return u;
}

/* Counts a flow (coef·w = cw) of the component at root on passive constraint r. */
static int pas_add(fluid_t *fl, int32_t root, int32_t r, double cw)
{
    comp_t *C = &fl->res[root].comp;
    pas_t *e = pas_of(C, r);
    if (!e) {
        res_t *P = &fl->res[r];
        if (fluid_reserve32((void **)&C->pas, &C->cappas, C->npas + 1, sizeof *C->pas) ||
            fluid_reserve32((void **)&P->users, &P->capusers, P->nusers + 1, sizeof *P->users))
            return ERR_NOMEM;
        P->users[P->nusers++] = (user_t){root, 0};
        e = &C->pas[C->npas++];
        *e = (pas_t){r, 0, 0};
    }
    e->nflows++;
    e->wsum += cw;
    return 0;
}

/* Takes a flow (coef·w = cw) of the component at root off passive constraint r. */
static void pas_sub(fluid_t *fl, int32_t root, int32_t r, double cw, int64_t now_ps)
{
    comp_t *C = &fl->res[root].comp;
    pas_t *e = pas_of(C, r);
    assert(e && e->nflows > 0);
    if (--e->nflows) {
        e->wsum -= cw;
        return;
    }
    pas_drop(C, e);
    res_t *P = &fl->res[r];
    user_drop(P, root);
    set_used(P, pas_total(P), now_ps);
}

/* ---- components ---------------------------------------------------------------------------- */

/* Merges the components rooted at a and b (either may be -1, none); returns the new root, or -1 when
 * out of memory. */
static int32_t unite(fluid_t *fl, int32_t a, int32_t b)
{
    if (a < 0 || a == b) return b < 0 ? a : b;
    if (b < 0) return a;
    if (fl->res[a].comp.nmem < fl->res[b].comp.nmem) {
        int32_t t = a;
        a = b;
        b = t;
    }
    comp_t *A = &fl->res[a].comp, *B = &fl->res[b].comp;
    if (fluid_reserve32((void **)&A->members, &A->capmem, A->nmem + B->nmem, sizeof *A->members) ||
        fluid_reserve32((void **)&A->capped, &A->capcap, A->ncap + B->ncap, sizeof *A->capped) ||
        fluid_reserve32((void **)&A->pas, &A->cappas, A->npas + B->npas, sizeof *A->pas))
        return -1;
    memcpy(A->members + A->nmem, B->members, (size_t)B->nmem * sizeof *B->members);
    A->nmem += B->nmem;
    if (B->ncap) {
        memcpy(A->capped + A->ncap, B->capped, (size_t)B->ncap * sizeof *B->capped);
        A->ncap += B->ncap;
        qsort(A->capped, (size_t)A->ncap, sizeof *A->capped, cmp_capent);
    }
    for (int32_t i = 0; i < B->npas; i++) {
        res_t *P = &fl->res[B->pas[i].res];
        pas_t *e = pas_of(A, B->pas[i].res);
        if (e) {
            /* Both crossed it: one user now (its share is recomputed by the solve that follows). */
            e->nflows += B->pas[i].nflows;
            e->wsum += B->pas[i].wsum;
            user_of(P, a)->contrib += user_of(P, b)->contrib;
            user_drop(P, b);
        } else {
            A->pas[A->npas++] = B->pas[i];
            user_of(P, b)->root = a;
        }
    }
    A->nflows += B->nflows;
    B->nmem = B->ncap = B->nflows = B->npas = 0;
    fl->res[b].parent = a;
    return a;
}

/* Makes passive constraint r a member, merging every component that crosses it; returns the root, or
 * -1 when out of memory. */
static int32_t promote(fluid_t *fl, int32_t r)
{
    res_t *R = &fl->res[r];
    assert(R->parent == PASSIVE);
    if (fluid_reserve32((void **)&R->comp.members, &R->comp.capmem, 1, sizeof *R->comp.members)) return -1;
    R->comp.members[0] = r;
    R->comp.nmem = 1;
    R->parent = r;
    int32_t root = r;
    while (R->nusers) {
        int32_t u = R->users[--R->nusers].root;
        comp_t *U = &fl->res[u].comp;
        pas_drop(U, pas_of(U, r));
        if ((root = unite(fl, root, u)) < 0) return -1;
    }
    return root;
}

/* Turns the members of an empty component passive again, all idle from now_ps. */
static void dissolve(fluid_t *fl, int32_t root, int64_t now_ps)
{
    comp_t *C = &fl->res[root].comp;
    assert(!C->npas && !C->ncap);
    for (int32_t k = 0; k < C->nmem; k++) {
        res_t *R = &fl->res[C->members[k]];
        assert(!R->n && !R->grp.n);
        R->parent = PASSIVE;
        R->grp.lambda = 0;
        R->grp.next_ps = SIM_TIME_NEVER;
        fluid_grp_next(fl, C->members[k]);
        set_used(R, 0, now_ps);
    }
    C->nmem = 0;
}

/* ---- the solver ---------------------------------------------------------------------------- */

typedef struct fill {
    uint64_t m;      /* this fill's mark */
    int32_t nlive;   /* members some flow crosses, in fl->live */
    int32_t nfixed;  /* flows fixed one by one, in fl->fixed */
    int32_t ci;      /* capped flows before it are fixed */
    int32_t last;    /* the constraint of the last level, or -1 */
} fill_t;

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

/* Progressive filling over the component rooted at root, into scratch only (nothing is applied).
 *
 * It starts from the kept sums; caps are met in their sorted order. Flows fixed before the last level
 * are fixed one by one. The last level, where one constraint b holds every flow still unfixed, fixes
 * them all at once without visiting them. Levels tie to the lowest constraint id, so the result does
 * not depend on the order in which constraints joined the component. Passive constraints take no
 * level but count the component's usage (its share) in fixed_use. */
static void fill(fluid_t *fl, int32_t root, fill_t *st)
{
    uint64_t m = ++fl->mark;
    comp_t *C = &fl->res[root].comp;
    /* live: the members some flow crosses; act: those of them with unfixed flows, compacted as levels
     * fix them. The others hold no flow (wsum exactly 0) and only take part in the apply step. */
    int32_t *live = fl->live, *act = fl->act, nlive = 0;
    for (int32_t k = 0; k < C->nmem; k++) {
        res_t *R = &fl->res[C->members[k]];
        R->unfixed_w = R->wsum;
        R->fixed_use = 0;
        R->n_unfixed = R->n;
        R->new_lambda = 0;
        if (R->n) live[nlive++] = C->members[k];
    }
    for (int32_t k = 0; k < C->npas; k++) {
        res_t *P = &fl->res[C->pas[k].res];
        P->unfixed_w = C->pas[k].wsum;
        P->fixed_use = 0;
        P->n_unfixed = C->pas[k].nflows;
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
            if (lam < lb || (lam == lb && act[k] < b)) {
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
            for (int32_t k = 0; k < C->npas; k++) {
                res_t *P = &fl->res[C->pas[k].res];
                P->fixed_use += lb * P->unfixed_w;
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
    assert(left == 0 || last >= 0);
    *st = (fill_t){m, nlive, nfixed, ci, last};
}

/* The first passive constraint of root's component that its fill would overload, or -1. */
static int32_t overloaded(fluid_t *fl, int32_t root)
{
    comp_t *C = &fl->res[root].comp;
    for (int32_t k = 0; k < C->npas; k++) {
        res_t *P = &fl->res[C->pas[k].res];
        double total = P->fixed_use;
        for (int32_t i = 0; i < P->nusers; i++)
            if (P->users[i].root != root) total += P->users[i].contrib;
        if (total > BIND_SHARE * P->capacity) return C->pas[k].res;
    }
    return -1;
}

/* Applies a fill at now_ps: moves only the flows whose group changed, and touches only the groups
 * whose flows or rate changed and the constraints whose usage changed. */
static int apply(fluid_t *fl, int32_t root, const fill_t *st, int32_t new_id, int64_t now_ps)
{
    comp_t *C = &fl->res[root].comp;
    uint64_t m = st->m;
    int32_t nmov = 0, nt = 0;
    if (st->last >= 0) {
        /* Unfixed flows outside the last level's group: members of other groups, capped flows no longer
         * capped, and the flow just added. Listed first: moving edits the heaps. */
        for (int32_t k = 0; k < C->nmem; k++) {
            group_t *g = &fl->res[C->members[k]].grp;
            if (C->members[k] == st->last) continue;
            for (int32_t i = 0; i < g->n; i++)
                if (fl->fl[g->h[i].id].mark != m) fl->movers[nmov++] = g->h[i].id;
        }
        for (int32_t i = st->ci; i < C->ncap; i++) {  /* those before ci are all fixed */
            flow_t *f = &fl->fl[C->capped[i].id];
            if (f->mark != m && f->group == GROUP_CAP) fl->movers[nmov++] = C->capped[i].id;
        }
        if (new_id >= 0 && fl->fl[new_id].mark != m) fl->movers[nmov++] = new_id;
    }
    for (int32_t i = 0; i < st->nfixed; i++) {
        flow_t *f = &fl->fl[fl->fixed[i]];
        int rc = fluid_move(fl, fl->fixed[i], f->new_group, f->new_gw, now_ps, m, &nt);
        if (rc) return rc;
    }
    for (int32_t i = 0; i < nmov; i++) {
        int rc = fluid_move(fl, fl->movers[i], st->last, fl->fl[fl->movers[i]].weight, now_ps, m, &nt);
        if (rc) return rc;
    }
    for (int32_t k = 0; k < C->nmem; k++) {
        int32_t r = C->members[k];
        res_t *R = &fl->res[r];
        double lambda = R->grp.n ? R->new_lambda : 0;
        if (lambda != R->grp.lambda) {
            grp_advance(&R->grp, now_ps);  /* at the old rate */
            R->grp.lambda = lambda;
            if (R->grp.mark != m) {
                R->grp.mark = m;
                fl->touched[nt++] = r;
            }
        }
        set_used(R, R->fixed_use, now_ps);
    }
    for (int32_t i = 0; i < nt; i++) fluid_grp_next(fl, fl->touched[i]);
    for (int32_t k = 0; k < C->npas; k++) {
        res_t *P = &fl->res[C->pas[k].res];
        user_of(P, root)->contrib = P->fixed_use;
        set_used(P, pas_total(P), now_ps);
    }
    return 0;
}

int fluid_comp_solve(fluid_t *fl, int32_t root, int32_t new_id, int64_t now_ps)
{
    fill_t st;
    for (;;) {
        fill(fl, root, &st);
        int32_t r = overloaded(fl, root);
        if (r < 0) break;
        if ((root = promote(fl, r)) < 0) return ERR_NOMEM;
    }
    return apply(fl, root, &st, new_id, now_ps);
}

int fluid_comp_capacity(fluid_t *fl, int32_t r, int64_t now_ps)
{
    res_t *R = &fl->res[r];
    if (R->parent != PASSIVE) return fluid_comp_solve(fl, find(fl, r), -1, now_ps);
    if (R->nusers && pas_total(R) > BIND_SHARE * R->capacity) {
        int32_t root = promote(fl, r);
        return root < 0 ? ERR_NOMEM : fluid_comp_solve(fl, root, -1, now_ps);
    }
    return 0;
}

/* ---- flows joining and leaving ------------------------------------------------------------- */

int fluid_comp_add(fluid_t *fl, int32_t id, int64_t now_ps)
{
    flow_t *f = &fl->fl[id];
    use_t *u = uses_of(f);
    double s = f->cap > 0 ? f->cap : INFINITY, best = INFINITY;
    int32_t root = -1, anchor = -1;
    for (int32_t k = 0; k < f->n_uses; k++) {
        res_t *R = &fl->res[u[k].res];
        double sk = R->capacity / u[k].coef;
        if (sk < s) s = sk;
        if (sk < best || (sk == best && u[k].res < anchor)) {
            best = sk;
            anchor = u[k].res;
        }
        if (R->parent == PASSIVE) continue;
        if (root < 0) f->home = u[k].res;
        if ((root = unite(fl, root, find(fl, u[k].res))) < 0) return ERR_NOMEM;
    }
    f->standalone = s;
    if (root < 0) {
        f->home = anchor;
        if ((root = promote(fl, anchor)) < 0) return ERR_NOMEM;
    }
    for (int32_t k = 0; k < f->n_uses; k++) {
        res_t *R = &fl->res[u[k].res];
        u[k].slot = R->n;
        R->fl[R->n++] = (slot_t){id, k};
        R->wsum += u[k].coef * f->weight;
        if (R->parent == PASSIVE && pas_add(fl, root, u[k].res, u[k].coef * f->weight)) return ERR_NOMEM;
    }
    comp_t *C = &fl->res[root].comp;
    C->nflows++;
    if (f->cap > 0) {
        capent_t e = {f->cap / f->weight, f->seq, id};
        if (fluid_reserve32((void **)&C->capped, &C->capcap, C->ncap + 1, sizeof *C->capped)) return ERR_NOMEM;
        int32_t at = capped_find(C, &e);
        memmove(C->capped + at + 1, C->capped + at, (size_t)(C->ncap - at) * sizeof *C->capped);
        C->capped[at] = e;
        C->ncap++;
    }
    return fluid_comp_solve(fl, root, id, now_ps);
}

void fluid_comp_unlink(fluid_t *fl, flow_t *f, int64_t now_ps, int32_t *nseeds)
{
    use_t *u = uses_of(f);
    if (!f->n_uses) return;
    int32_t root = find(fl, f->home);
    for (int32_t k = 0; k < f->n_uses; k++) {
        res_t *R = &fl->res[u[k].res];
        slot_t last = R->fl[--R->n];
        if (u[k].slot < R->n) {
            R->fl[u[k].slot] = last;
            uses_of(&fl->fl[last.flow])[last.use].slot = u[k].slot;
        }
        /* Exact zero when idle, so rounding in the kept sum cannot outlive its flows. */
        R->wsum = R->n ? R->wsum - u[k].coef * f->weight : 0;
        if (R->parent == PASSIVE) pas_sub(fl, root, u[k].res, u[k].coef * f->weight, now_ps);
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
