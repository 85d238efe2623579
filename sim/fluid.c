/* fluid — groups, completions and the public API; components and the solver are in fluid_comp.c. */
#include "sim/fluid.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "sim/fluid_int.h"

/* g's earliest finish from its clock at g->t_ps. */
static int64_t grp_next_of(const group_t *g)
{
    if (!g->n || !(g->lambda > 0)) return SIM_TIME_NEVER;
    double s = (g->h[0].key - g->v) / g->lambda;
    return sim_ps_add(g->t_ps, s > 0 ? sim_ps_or_never(s) : 0);
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
        double dt_ps = (double)(now_ps - f->t_in_ps), lost_ps;
        /* The cap group's clock is real time: its flows lose dt·(1 − cap/standalone), from the exact
         * integer time (0 when the cap is the flow's standalone rate), not from clock differences. */
        if (f->group == GROUP_CAP) lost_ps = dt_ps * (1 - f->gw / f->standalone);
        else lost_ps = dt_ps - f->gw * (g->v - f->v_in) / f->standalone * (double)SIM_PS_PER_S;
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

/* ---- the queue of groups by next finish ---------------------------------------------------- */

/* The constraints' groups with a finite next finish, in a min-heap by (next_ps, id): the earliest
 * completion and the groups due at an instant without a scan of every constraint. */
static inline int gq_less(const fluid_t *fl, int32_t a, int32_t b)
{
    int64_t ta = fl->res[a].grp.next_ps, tb = fl->res[b].grp.next_ps;
    return ta < tb || (ta == tb && a < b);
}

static inline void gq_set(fluid_t *fl, int32_t i, int32_t r)
{
    fl->gq[i] = r;
    fl->res[r].gq_pos = i;
}

static void gq_sift(fluid_t *fl, int32_t i)
{
    int32_t r = fl->gq[i];
    while (i > 0 && gq_less(fl, r, fl->gq[(i - 1) / 2])) {
        gq_set(fl, i, fl->gq[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= fl->ngq) break;
        if (c + 1 < fl->ngq && gq_less(fl, fl->gq[c + 1], fl->gq[c])) c++;
        if (!gq_less(fl, fl->gq[c], r)) break;
        gq_set(fl, i, fl->gq[c]);
        i = c;
    }
    gq_set(fl, i, r);
}

static void gq_remove(fluid_t *fl, int32_t r)
{
    int32_t i = fl->res[r].gq_pos, last = fl->gq[--fl->ngq];
    fl->res[r].gq_pos = -1;
    if (i < fl->ngq) {
        gq_set(fl, i, last);
        gq_sift(fl, i);
    }
}

void fluid_grp_next(fluid_t *fl, int32_t gi)
{
    group_t *g = grp(fl, gi);
    g->next_ps = grp_next_of(g);
    if (gi == GROUP_CAP) return;
    res_t *R = &fl->res[gi];
    if (g->next_ps == SIM_TIME_NEVER) {
        if (R->gq_pos >= 0) gq_remove(fl, gi);
        return;
    }
    if (R->gq_pos < 0) {
        R->gq_pos = fl->ngq;
        fl->gq[fl->ngq++] = gi;
    }
    gq_sift(fl, R->gq_pos);
}

static void touch(fluid_t *fl, int32_t gi, uint64_t m, int32_t *ntouched)
{
    group_t *g = grp(fl, gi);
    if (g->mark == m) return;
    g->mark = m;
    fl->touched[(*ntouched)++] = gi;
}

int fluid_move(fluid_t *fl, int32_t id, int32_t gi, double gw, int64_t now_ps, uint64_t m, int32_t *ntouched)
{
    flow_t *f = &fl->fl[id];
    if (f->group == gi && f->gw == gw) return 0;
    double rem = f->rem;
    if (f->group != GROUP_NONE) {
        grp_advance(grp(fl, f->group), now_ps);
        touch(fl, f->group, m, ntouched);
        rem = leave(fl, f, now_ps);
    }
    grp_advance(grp(fl, gi), now_ps);
    touch(fl, gi, m, ntouched);
    return enter(fl, id, gi, gw, rem, now_ps);
}

int fluid_reserve32(void **p, int32_t *cap, int32_t n, size_t size)
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

/* ---- public API ---------------------------------------------------------------------------- */

fluid_t *fluid_new(void)
{
    fluid_t *fl = calloc(1, sizeof *fl);
    if (!fl) return NULL;
    fl->capg.lambda = 1.0;  /* the cap group's clock is real time in seconds */
    fl->capg.next_ps = SIM_TIME_NEVER;
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
        free(fl->res[r].comp.pas);
        free(fl->res[r].users);
    }
    for (int32_t i = 0; i < fl->nfl; i++) free(fl->fl[i].ext);
    free(fl->capg.h);
    free(fl->res);
    free(fl->fl);
    free(fl->free_ids);
    free(fl->gq);
    free(fl->seeds);
    free(fl->live);
    free(fl->act);
    free(fl->touched);
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
            grow((void **)&fl->gq, (size_t)cap, sizeof *fl->gq) ||
            grow((void **)&fl->seeds, (size_t)cap, sizeof *fl->seeds) ||
            grow((void **)&fl->live, (size_t)cap, sizeof *fl->live) ||
            grow((void **)&fl->act, (size_t)cap, sizeof *fl->act) ||
            grow((void **)&fl->touched, (size_t)cap + 1, sizeof *fl->touched))  /* + the cap group */
            return ERR_NOMEM;
        fl->capres = cap;
    }
    res_t *R = &fl->res[fl->nres];
    memset(R, 0, sizeof *R);
    R->parent = PASSIVE;
    R->gq_pos = -1;
    R->capacity = capacity;
    R->grp.next_ps = SIM_TIME_NEVER;
    *out = fl->nres++;
    return 0;
}

int fluid_res_set_capacity(fluid_t *fl, int32_t r, double capacity, int64_t now_ps)
{
    res_t *R = &fl->res[r];
    R->capacity = capacity;
    hist_tw_set(&R->busy, now_ps, R->used / capacity);  /* a re-solve updates only changed usage */
    return fluid_comp_capacity(fl, r, now_ps);
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
    f->home = -1;
    f->mark = fl->mark;
    use_t *u = uses_of(f);
    for (int32_t k = 0; k < n; k++) u[k] = (use_t){req->res[k], -1, req->coef[k]};
    *out = id;
    if (n) return fluid_comp_add(fl, id, now_ps);
    f->standalone = f->cap;
    grp_advance(&fl->capg, now_ps);
    int rc = enter(fl, id, GROUP_CAP, f->cap, f->rem, now_ps);
    fluid_grp_next(fl, GROUP_CAP);
    return rc;
}

int fluid_flow_remove(fluid_t *fl, int32_t id, int64_t now_ps)
{
    flow_t *f = &fl->fl[id];
    int32_t gi = f->group;
    grp_advance(grp(fl, gi), now_ps);
    leave(fl, f, now_ps);
    fluid_grp_next(fl, gi);
    int32_t nseeds = 0;
    fluid_comp_unlink(fl, f, now_ps, &nseeds);
    free_id(fl, id);
    return nseeds ? fluid_comp_solve(fl, fl->seeds[0], -1, now_ps) : 0;
}

int64_t fluid_next_ps(fluid_t *fl)
{
    int64_t t = fl->capg.next_ps;
    if (fl->ngq && fl->res[fl->gq[0]].grp.next_ps < t) t = fl->res[fl->gq[0]].grp.next_ps;
    return t;
}

/* Takes the done flows of group gi (its next completion is due) into fl->done. */
static void collect_group(fluid_t *fl, int32_t gi, int64_t now_ps, int32_t *nd)
{
    group_t *g = grp(fl, gi);
    grp_advance(g, now_ps);
    while (g->n) {
        flow_t *f = &fl->fl[g->h[0].id];
        if ((f->key - g->v) * f->gw >= SIM_WORK_EPSILON && grp_next_of(g) > now_ps) break;
        leave(fl, f, now_ps);
        f->state = FLOW_DONE;
        fl->done[(*nd)++] = (int32_t)(f - fl->fl);
    }
    fluid_grp_next(fl, gi);
}

int fluid_collect_done(fluid_t *fl, int64_t now_ps, const int32_t **ids, size_t *n)
{
    int32_t nd = 0;
    if (fl->capg.next_ps <= now_ps) collect_group(fl, GROUP_CAP, now_ps, &nd);
    /* The groups due, taken out of the queue first: collecting puts them back. */
    int32_t ndue = 0;
    while (fl->ngq && fl->res[fl->gq[0]].grp.next_ps <= now_ps) {
        fl->act[ndue++] = fl->gq[0];
        gq_remove(fl, fl->gq[0]);
    }
    for (int32_t i = 0; i < ndue; i++) collect_group(fl, fl->act[i], now_ps, &nd);
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
    for (int32_t i = 0; i < nd; i++) fluid_comp_unlink(fl, &fl->fl[fl->done[i]], now_ps, &nseeds);
    for (int32_t k = 0; k < nseeds; k++) {
        int rc = fluid_comp_solve(fl, fl->seeds[k], -1, now_ps);
        if (rc) return rc;
    }
    return 0;
}

void fluid_flow_release(fluid_t *fl, int32_t id) { free_id(fl, id); }

double fluid_flow_rate(const fluid_t *fl, int32_t id)
{
    const flow_t *f = &fl->fl[id];
    if (f->state != FLOW_RUN) return 0;
    return f->gw * grp((fluid_t *)fl, f->group)->lambda;
}

double fluid_flow_remaining(const fluid_t *fl, int32_t id, int64_t now_ps)
{
    const flow_t *f = &fl->fl[id];
    if (f->state != FLOW_RUN) return 0;
    const group_t *g = grp((fluid_t *)fl, f->group);
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
