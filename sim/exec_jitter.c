/* exec_jitter — the ops' random variation: their times' tail and the copy hand-off's spread, drawn
 * from the executor's own stream. */
#include "sim/exec_int.h"

#include <math.h>

/* The next draw of the jitter's stream (SplitMix64), uniform on (0, 1]. */
static double jitter_uniform(exec_t *x)
{
    uint64_t z = (x->jitter_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return ((double)(z >> 11) + 1.0) * 0x1.0p-53;
}

/* One hand-off: its mean, or, with a spread, a uniform draw over mean ± spread/2 (never below 0). */
sim_ps_t exec_handoff_draw_ps(exec_t *x)
{
    double h = (double)x->cfg.copy_handoff_ps;
    if (x->cfg.copy_handoff_spread_ps > 0) h += (double)x->cfg.copy_handoff_spread_ps * (jitter_uniform(x) - 0.5);
    return h > 0 ? (sim_ps_t)llround(h) : 0;
}

/* A draw of the op's jitter, added to its latency (never below 0): s·(E − ln 2), E ~ Exp(1), with
 * s = (abs + rel·t)/ln 50, so that its median is 0 and its p99 the configured spread (of an op moving
 * host bytes, the copy engine's pair or, when its SMs read them, the gathers'). An op with nothing
 * to do alone (a marker) does not vary. */
void exec_op_jitter(exec_t *x, const xop_t *o, plan_cost_t *c)
{
    bool host = o->op.bytes_host > 0, sm = o->op.exec == PLAN_EXEC_GPU;
    double abs_s = !host ? x->cfg.jitter_abs_s : sm ? x->cfg.jitter_gather_abs_s : x->cfg.jitter_copy_abs_s;
    double rel = !host ? x->cfg.jitter_rel : sm ? x->cfg.jitter_gather_rel : x->cfg.jitter_copy_rel;
    if (!(abs_s > 0 || rel > 0)) return;
    sim_ps_t alone = exec_op_alone_ps(x, o, c);
    if (alone == 0) return;
    double u = jitter_uniform(x);
    double s = (abs_s + rel * ps_to_s(alone)) / log(50.0);
    double lat = ps_to_s(c->latency_ps) + s * (-log(u) - log(2.0));
    c->latency_ps = lat > 0 ? sim_ps_or_never(lat) : 0;
}
