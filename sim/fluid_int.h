/* fluid internals shared by fluid.c (groups, completions, the public API) and fluid_comp.c (components
 * and the solver). Not for use outside the fluid. */
#ifndef ODSIM_SIM_FLUID_INT_H
#define ODSIM_SIM_FLUID_INT_H

#include <stdint.h>

#include "sim/fluid.h"
#include "sim/hist.h"
#include "sim/sim.h"

#define INLINE_USES 4
#define GROUP_NONE (-2) /* not yet placed (during its first solve) */
#define GROUP_CAP  (-1)
#define PASSIVE    (-1) /* res_t.parent of a constraint in no component (a coupler) */

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
    uint64_t mark;   /* solve scratch: touched by a move in this solve */
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

/* A component's share of a passive constraint: its flows crossing it. */
typedef struct pas {
    int32_t res;
    int32_t nflows;
    double wsum;    /* Σ coef·w over those flows */
} pas_t;

/* A component using a passive constraint, and its usage there at its last solve. */
typedef struct user {
    int32_t root;
    double contrib;
} user_t;

/* Components are a union-find over the member (non-passive) constraints, merged when a flow joins two
 * or a passive constraint binds, and dissolved when the last flow leaves. */
typedef struct comp {
    int32_t *members;   /* constraints */
    int32_t nmem, capmem;
    capent_t *capped;   /* its capped flows, sorted by (lambda, seq) */
    int32_t ncap, capcap;
    int32_t nflows;     /* flows crossing it */
    pas_t *pas;         /* the passive constraints its flows cross */
    int32_t npas, cappas;
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
    int32_t parent;    /* union-find (the root holds the component), or PASSIVE */
    int32_t gq_pos;    /* position in the fluid's queue of groups, -1 when not in it */
    comp_t comp;
    user_t *users;     /* while passive: the components whose flows cross it */
    int32_t nusers, capusers;
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
    int32_t home;       /* a member constraint it crosses (its component's), -1 without uses */
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
    int32_t *gq;             /* min-heap of constraints by (grp.next_ps, id), those with a finite next */
    int32_t ngq;
    uint64_t next_seq;
    uint64_t mark;
    /* scratch, sized to capres or capfl */
    int32_t *seeds, *live, *act, *fixed, *movers, *done, *touched;
};

static inline use_t *uses_of(flow_t *f) { return f->n_uses <= INLINE_USES ? f->inl : f->ext; }

static inline group_t *grp(fluid_t *fl, int32_t g) { return g == GROUP_CAP ? &fl->capg : &fl->res[g].grp; }

/* Brings g's clock to now_ps at its current rate. */
static inline void grp_advance(group_t *g, int64_t now_ps)
{
    if (now_ps == g->t_ps) return;
    g->v += g->lambda * (double)(now_ps - g->t_ps) / (double)SIM_PS_PER_S;
    g->t_ps = now_ps;
}

/* Recomputes group gi's earliest finish (its clock at its t_ps) and its place in the group queue. */
void fluid_grp_next(fluid_t *fl, int32_t gi);
/* Moves flow id to group gi (weight gw there) at now_ps unless it is there already, advancing the
 * groups it leaves and enters; each group touched is marked with m and listed in fl->touched. */
int fluid_move(fluid_t *fl, int32_t id, int32_t gi, double gw, int64_t now_ps, uint64_t m, int32_t *ntouched);
/* Grows *p (of *cap elements of size) to hold at least n; 0 or ERR_NOMEM. */
int fluid_reserve32(void **p, int32_t *cap, int32_t n, size_t size);

/* Links a new flow (its uses filled in, not yet linked) into its constraints and component and
 * solves; 0 or ERR_NOMEM (nothing linked when the lists could not grow). */
int fluid_comp_add(fluid_t *fl, int32_t id, int64_t now_ps);
/* Unlinks flow f from its constraints and component, appending the component's root to fl->seeds
 * (once) unless f was its last flow, when the component is dissolved. */
void fluid_comp_unlink(fluid_t *fl, flow_t *f, int64_t now_ps, int32_t *nseeds);
/* Re-solves the component rooted at root at now_ps; new_id is a flow just added, or -1. */
int fluid_comp_solve(fluid_t *fl, int32_t root, int32_t new_id, int64_t now_ps);
/* Applies a capacity change of constraint r at now_ps. */
int fluid_comp_capacity(fluid_t *fl, int32_t r, int64_t now_ps);

#endif
