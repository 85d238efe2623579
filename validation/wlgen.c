/* wlgen — seeded random replay workloads (see wlgen.h). */
#include "validation/wlgen.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "common/cfg.h"

/* The sets of issue 34, fixed before any measurement: never change a seed, count or name here. */
static const wlgen_set_t sets[] = {
    {"random_dev", "rdev", 120, 1000000, false},
    {"random", "rsealed", 240, 2000000, true},
};

/* the most ops a generated session may have: the format's limit when the sets were drawn (declared in
 * `odsim params`, so it stays whatever RF_MAX_OPS becomes) */
#define WLGEN_MAX_OPS 512
#define P(k, t, f, d, lo, hi, doc) {k, t, offsetof(wlgen_params_t, f), d, lo, hi, NULL, doc}
static const cfg_param_t table[] = {
    P("sessions_mid_max", CFG_T_INT, sessions_mid_max, "4", 2, 15,
      "session strata by index i: (i/3)%3 = 0: 1 session, 1: 2..this, 2: this+1..sessions_max (uniform within)"),
    P("sessions_max", CFG_T_INT, sessions_max, "16", 3, RF_MAX_SESSIONS, "the most sessions a workload has"),
    P("short_one_in", CFG_T_INT, short_one_in, "3", 1, 1000,
      "the block of nine workloads i/9 is short when it is 0 modulo this (1/3 of every mode x session stratum)"),
    P("step_min", CFG_T_SECONDS, step_min_s, "0.5ms", 1e-6, 1,
      "short workloads: step target log-uniform in [this, short_step_max]"),
    P("short_step_max", CFG_T_SECONDS, short_step_max_s, "2ms", 1e-6, 1,
      "the boundary of short steps; other workloads: target log-uniform in [this, step_max]"),
    P("step_max", CFG_T_SECONDS, step_max_s, "50ms", 1e-6, 10, "the longest step target"),
    P("sync_prob_long", CFG_T_DOUBLE, sync_prob_long, "0.3", 0, 1,
      "probability that a session of a long workload has a sync inside its step (short ones always do)"),
    P("streams_max", CFG_T_INT, streams_max, "4", 1, RF_MAX_STREAMS, "a session's streams: uniform 1..this"),
    P("ops_min", CFG_T_INT, ops_min, "2", 1, WLGEN_MAX_OPS, "a session's ops: uniform ops_min..ops_max"),
    P("ops_max", CFG_T_INT, ops_max, "24", 1, WLGEN_MAX_OPS,
      "the most ops of a session (3 at least where a sync must lie inside)"),
    P("op_min_share", CFG_T_SECONDS, op_min_share_s, "10us", 1e-7, 1,
      "a session has at most its share of the target / this ops (ops_min at least): no op far below an API call"),
    P("region_min", CFG_T_BYTES, region_min_bytes, "64MiB", 4096, RF_MAX_REGION_BYTES,
      "a session's host region: log-uniform in [this, the stratum's cap], rounded down to 4 KiB"),
    P("region_cap1", CFG_T_BYTES, region_cap1_bytes, "8GiB", 4096, RF_MAX_REGION_BYTES,
      "region cap of the one-session stratum, bytes"),
    P("region_cap2", CFG_T_BYTES, region_cap2_bytes, "4GiB", 4096, RF_MAX_REGION_BYTES,
      "region cap of the middle stratum (so 4 sessions pin at most 16 GiB), bytes"),
    P("region_cap3", CFG_T_BYTES, region_cap3_bytes, "1GiB", 4096, RF_MAX_REGION_BYTES,
      "region cap of the largest stratum (16 sessions pin at most 16 GiB), bytes"),
    P("idle_prob", CFG_T_DOUBLE, idle_prob, "0.3", 0, 1, "probability that a session idles after each step"),
    P("idle_min", CFG_T_SECONDS, idle_min_s, "50us", 1e-6, 10, "idle gap log-uniform in [this, idle_max]"),
    P("idle_max", CFG_T_SECONDS, idle_max_s, "5ms", 1e-6, 10, "the longest idle gap"),
    P("host_prob", CFG_T_DOUBLE, host_prob, "0.15", 0, 1,
      "probability that an op slot is host time; other slots draw a kind by the weights w_*"),
    P("host_min", CFG_T_SECONDS, host_min_s, "5us", 0, 10, "host op: its share of the target, at least this"),
    P("host_max", CFG_T_SECONDS, host_max_s, "500us", 0, 10, "host op: at most this"),
    P("w_h2d", CFG_T_DOUBLE, w_h2d, "0.15", 0, 1, "weight of h2d among non-host slots (weights are normalised)"),
    P("w_d2h", CFG_T_DOUBLE, w_d2h, "0.05", 0, 1, "weight of d2h"),
    P("w_h2d2d", CFG_T_DOUBLE, w_h2d2d, "0.1", 0, 1, "weight of h2d2d (one 2D copy)"),
    P("w_h2dbatch", CFG_T_DOUBLE, w_h2dbatch, "0.1", 0, 1, "weight of h2dbatch (one batched copy)"),
    P("w_gather", CFG_T_DOUBLE, w_gather, "0.2", 0, 1, "weight of gather (SM kernel reading host memory)"),
    P("w_hbm", CFG_T_DOUBLE, w_hbm, "0.15", 0, 1, "weight of hbm (HBM-streaming kernel)"),
    P("w_compute", CFG_T_DOUBLE, w_compute, "0.1", 0, 1, "weight of compute (FP32 FMA kernel)"),
    P("w_spin", CFG_T_DOUBLE, w_spin, "0.05", 0, 1, "weight of spin (one-block kernel of a set time)"),
    P("w_sync", CFG_T_DOUBLE, w_sync, "0.05", 0, 1, "weight of sync (host waits for the session's ops)"),
    P("piece_min", CFG_T_BYTES, piece_min_bytes, "256B", 16, 256.0 * 1048576,
      "transfers: piece_bytes a power of two with uniform exponent in [this, the largest fitting the op's share]"),
    P("piece_max", CFG_T_BYTES, piece_max_bytes, "4MiB", 16, 256.0 * 1048576, "the largest piece, bytes"),
    P("plain_pieces_max", CFG_T_INT, plain_pieces_max, "256", 1, 1 << 20,
      "h2d and d2h issue one API call per piece: at most this many pieces"),
    P("after_prob", CFG_T_DOUBLE, after_prob, "0.3", 0, 1,
      "probability that an op on stream s > 0 waits for a random earlier op of another stream"),
    P("hbm_min", CFG_T_BYTES, hbm_min_bytes, "1MiB", 1, 64.0 * 1073741824, "hbm op: its share's bytes, at least this"),
    P("compute_min", CFG_T_DOUBLE, compute_min_flops, "1e8", 1, 1e15, "compute op: its share's FLOPs, at least this"),
    P("spin_min", CFG_T_SECONDS, spin_min_s, "5us", 0, 10, "spin op: its share less one API call, at least this"),
    P("spin_max", CFG_T_SECONDS, spin_max_s, "2ms", 0, 10, "spin op: at most this"),
    P("nominal_ce", CFG_T_DOUBLE, ce_Bps, "50e9", 1e6, 1e15,
      "nominal copy-engine rate, B/s (sizes ops only; not odsim's calibrated model)"),
    P("nominal_gather", CFG_T_DOUBLE, gather_Bps, "20e9", 1e6, 1e15,
      "nominal SM gather rate for pieces of gather_small_below and more, B/s (sizes ops only)"),
    P("gather_small_below", CFG_T_BYTES, gather_small_below_bytes, "4KiB", 1, 1e12,
      "gathers of smaller pieces go at nominal_gather_pieces"),
    P("nominal_gather_pieces", CFG_T_DOUBLE, gather_small_pieces_per_s, "200e6", 1, 1e15,
      "nominal SM gather rate of small pieces, pieces/s (sizes ops only)"),
    P("nominal_hbm", CFG_T_DOUBLE, hbm_Bps, "4e12", 1e6, 1e15, "nominal HBM streaming rate, B/s (sizes ops only)"),
    P("nominal_compute", CFG_T_DOUBLE, compute_flops_per_s, "50e12", 1e6, 1e18,
      "nominal FP32 rate, FLOP/s (sizes ops only)"),
    P("nominal_call", CFG_T_SECONDS, call_s, "5us", 0, 1, "nominal time of one API call or launch (sizes ops only)"),
    P("window_min", CFG_T_SECONDS, window_min_s, "200ms", 0.01, 60,
      "window_ms = window_steps x target, within [window_min, window_max]"),
    P("window_steps", CFG_T_DOUBLE, window_steps, "20", 1, 1e6, "steps of the target's length per window"),
    P("window_max", CFG_T_SECONDS, window_max_s, "2s", 0.01, 60, "the longest window"),
    P("min_steps", CFG_T_INT, min_steps, "10", 1, 100000, "min_steps of every workload"),
    P("warmup_steps", CFG_T_INT, warmup_steps, "3", 0, 1000, "warmup_steps of every workload"),
};
#undef P
#define N_PARAMS (sizeof table / sizeof table[0])

const wlgen_set_t *wlgen_set_find(const char *name)
{
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (!strcmp(sets[i].name, name)) return &sets[i];
    return NULL;
}

int wlgen_params_default(wlgen_params_t *p, err_t *e)
{
    memset(p, 0, sizeof *p);
    return cfg_bind(NULL, table, N_PARAMS, p, e);
}

void wlgen_describe(FILE *fp) { cfg_params_describe(fp, "odsim workload gen (random replay workloads)", table, N_PARAMS); }

/* ---- PRNG: xoshiro256** seeded by splitmix64 (self-contained, the same on every libc) ---------- */

typedef struct { uint64_t s[4]; } rng_t;

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(rng_t *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng_t *r)
{
    uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

/* Uniform in [0, 1). */
static double rng_u01(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* Uniform integer in [lo, hi] (hi >= lo). */
static uint64_t rng_int(rng_t *r, uint64_t lo, uint64_t hi) { return lo + rng_next(r) % (hi - lo + 1); }

/* Log-uniform in [a, b] (0 < a <= b). */
static double rng_logu(rng_t *r, double a, double b) { return a * exp(rng_u01(r) * log(b / a)); }

/* ---- sizing ---------------------------------------------------------------------------------- */

static uint64_t round_u64(double x) { return x <= 0 ? 0 : (uint64_t)floor(x + 0.5); }

static double clampd(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

static int log2_floor(uint64_t x)
{
    int k = 0;
    while (x >>= 1) k++;
    return k;
}

/* Time to move one piece of b bytes at the nominal rates, besides API calls. */
static double piece_s(const wlgen_params_t *p, int kind, uint64_t b)
{
    if (kind != RF_OP_GATHER) return (double)b / p->ce_Bps;
    return (double)b < p->gather_small_below_bytes ? 1.0 / p->gather_small_pieces_per_s : (double)b / p->gather_Bps;
}

double wlgen_op_nominal_s(const wlgen_params_t *p, const rf_op_t *o)
{
    switch (o->kind) {
    case RF_OP_H2D:
    case RF_OP_D2H: return (double)o->pieces * (p->call_s + piece_s(p, o->kind, o->piece_bytes));
    case RF_OP_H2D2D:
    case RF_OP_H2DBATCH:
    case RF_OP_GATHER: return p->call_s + (double)o->pieces * piece_s(p, o->kind, o->piece_bytes);
    case RF_OP_HBM: return p->call_s + (double)o->bytes / p->hbm_Bps;
    case RF_OP_COMPUTE: return p->call_s + (double)o->flops / p->compute_flops_per_s;
    case RF_OP_SPIN: return p->call_s + (double)o->us * 1e-6;
    case RF_OP_HOST: return (double)o->us * 1e-6;
    default: return 0;
    }
}

bool wlgen_sync_inside(const rf_session_t *s)
{
    for (uint32_t j = 1; j + 1 < s->n_ops; j++)
        if (s->ops[j].kind == RF_OP_SYNC) return true;
    return false;
}

/* A transfer filling share_s at the nominal rates: a power-of-two piece no larger than the share
 * holds, as many pieces as the share holds (1 at least; capped by the region and, for one call per
 * piece, by plain_pieces_max), over a span log-uniform between the pieces' bytes and the region. */
static void size_transfer(const wlgen_params_t *p, rng_t *r, double share_s, uint64_t region, rf_op_t *o)
{
    bool plain = o->kind == RF_OP_H2D || o->kind == RF_OP_D2H;
    double rate = o->kind == RF_OP_GATHER ? p->gather_Bps : p->ce_Bps;
    double fit = clampd((share_s - p->call_s) * rate, p->piece_min_bytes, p->piece_max_bytes);
    int k = (int)rng_int(r, (uint64_t)log2_floor((uint64_t)p->piece_min_bytes), (uint64_t)log2_floor((uint64_t)fit));
    uint64_t b = 1ull << k;
    double per_piece = piece_s(p, o->kind, b) + (plain ? p->call_s : 0);
    double fits = floor((share_s - (plain ? 0 : p->call_s)) / per_piece);
    uint64_t cap = plain ? (uint64_t)p->plain_pieces_max : 1ull << 20;
    if (cap > region / b) cap = region / b;
    uint64_t n = fits < 1 ? 1 : fits > (double)cap ? cap : (uint64_t)fits;
    uint64_t span = (uint64_t)rng_logu(r, (double)(n * b), (double)region) / b * b;
    o->pieces = n;
    o->piece_bytes = b;
    o->span_bytes = span < n * b ? n * b : span > region ? region / b * b : span;
}

/* Sizes op o of the given kind from its share of the session's target. */
static void size_op(const wlgen_params_t *p, rng_t *r, double share_s, uint64_t region, rf_op_t *o)
{
    double gpu_s = share_s - p->call_s; /* the kernel's part, after its launch */
    switch (o->kind) {
    case RF_OP_HBM:
        o->bytes = round_u64(fmax(p->hbm_min_bytes, gpu_s * p->hbm_Bps) / 4096) * 4096;
        break;
    case RF_OP_COMPUTE:
        o->flops = round_u64(fmax(p->compute_min_flops, gpu_s * p->compute_flops_per_s) / 1e6) * 1000000;
        break;
    case RF_OP_SPIN: o->us = round_u64(clampd(gpu_s, p->spin_min_s, p->spin_max_s) * 1e6); break;
    case RF_OP_HOST: o->us = round_u64(clampd(share_s, p->host_min_s, p->host_max_s) * 1e6); break;
    case RF_OP_SYNC: break;
    default: size_transfer(p, r, share_s, region, o);
    }
}

/* A kind for a non-host slot, by the declared weights. */
static rf_kind_t draw_kind(const wlgen_params_t *p, rng_t *r)
{
    const double w[] = {p->w_h2d, p->w_d2h, p->w_h2d2d, p->w_h2dbatch, p->w_gather,
                        p->w_hbm, p->w_compute, p->w_spin, p->w_sync};
    double sum = 0;
    for (int k = 0; k < RF_OP_HOST; k++) sum += w[k];
    double u = rng_u01(r) * sum;
    int k = 0;
    while (k < RF_OP_HOST - 1 && (u -= w[k]) >= 0) k++;
    return (rf_kind_t)k;
}

static bool on_gpu(rf_kind_t k) { return k != RF_OP_SYNC && k != RF_OP_HOST; }

/* One session whose step fills budget_s at the nominal rates. */
static void make_session(const wlgen_params_t *p, rng_t *r, uint32_t stratum, bool want_sync, double budget_s,
                         rf_session_t *s)
{
    const double caps[WLGEN_STRATA] = {p->region_cap1_bytes, p->region_cap2_bytes, p->region_cap3_bytes};
    uint64_t region = (uint64_t)rng_logu(r, p->region_min_bytes, caps[stratum]) / 4096 * 4096;
    s->region_bytes = region < 4096 ? 4096 : region;
    s->idle_us = rng_u01(r) < p->idle_prob ? round_u64(rng_logu(r, p->idle_min_s, p->idle_max_s) * 1e6) : 0;
    uint64_t streams = rng_int(r, 1, (uint64_t)p->streams_max);
    uint64_t lo = (uint64_t)p->ops_min, hi = (uint64_t)p->ops_max;
    uint64_t by_budget = (uint64_t)floor(budget_s / p->op_min_share_s);
    if (hi > by_budget) hi = by_budget;
    if (want_sync && lo < 3) lo = 3;
    if (hi < lo) hi = lo;
    uint32_t n = (uint32_t)rng_int(r, lo, hi);
    s->n_ops = n;

    for (uint32_t j = 0; j < n; j++) {
        memset(&s->ops[j], 0, sizeof s->ops[j]);
        s->ops[j].kind = rng_u01(r) < p->host_prob ? RF_OP_HOST : draw_kind(p, r);
    }
    if (want_sync && !wlgen_sync_inside(s)) s->ops[rng_int(r, 1, n - 2)].kind = RF_OP_SYNC;

    /* Dirichlet(1, ..., 1) shares of the budget over the ops that take time. */
    double w[RF_MAX_OPS], sum = 0;
    for (uint32_t j = 0; j < n; j++) {
        w[j] = s->ops[j].kind == RF_OP_SYNC ? 0 : -log(1 - rng_u01(r));
        sum += w[j];
    }
    for (uint32_t j = 0; j < n; j++) {
        rf_op_t *o = &s->ops[j];
        if (on_gpu(o->kind)) o->stream = (uint32_t)rng_int(r, 0, streams - 1);
        size_op(p, r, sum > 0 ? budget_s * w[j] / sum : 0, s->region_bytes, o);
        if (!on_gpu(o->kind) || o->stream == 0 || rng_u01(r) >= p->after_prob) continue;
        uint32_t cand[RF_MAX_OPS], nc = 0;
        for (uint32_t i = 0; i < j; i++)
            if (on_gpu(s->ops[i].kind) && s->ops[i].stream != o->stream) cand[nc++] = i;
        if (nc) o->after[o->n_after++] = cand[rng_int(r, 0, nc - 1)];
    }
}

int wlgen_make(const wlgen_params_t *p, const wlgen_set_t *set, uint32_t index, rf_workload_t *w,
               wlgen_info_t *info, err_t *e)
{
    if (index >= set->count)
        return err_set(e, ERR_RANGE, "workload gen: set %s has %u workloads, no index %u", set->name, set->count, index);
    memset(w, 0, sizeof *w);
    rng_t r;
    rng_seed(&r, set->seed0 + index);
    uint32_t stratum = (index / 3) % WLGEN_STRATA;
    bool is_short = (index / 9) % (uint64_t)p->short_one_in == 0;
    snprintf(w->name, sizeof w->name, "%s-%04u", set->prefix, index);
    w->mode = (rf_mode_t)(index % 3);
    w->seed = set->seed0 + index;
    w->min_steps = (uint64_t)p->min_steps;
    w->warmup_steps = (uint64_t)p->warmup_steps;

    const uint64_t lo[WLGEN_STRATA] = {1, 2, (uint64_t)p->sessions_mid_max + 1};
    const uint64_t hi[WLGEN_STRATA] = {1, (uint64_t)p->sessions_mid_max, (uint64_t)p->sessions_max};
    w->n_sessions = (uint32_t)rng_int(&r, lo[stratum], hi[stratum]);
    double target_s = is_short ? rng_logu(&r, p->step_min_s, p->short_step_max_s)
                               : rng_logu(&r, p->short_step_max_s, p->step_max_s);
    w->window_ms = (uint64_t)ceil(clampd(p->window_steps * target_s, p->window_min_s, p->window_max_s) * 1e3);
    /* The sessions share the GPU: each step's work is the target over the sessions, so a step of
     * all of them together takes about the target at the nominal rates. */
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        bool want_sync = is_short || rng_u01(&r) < p->sync_prob_long;
        make_session(p, &r, stratum, want_sync, target_s / w->n_sessions, &w->sessions[i]);
    }
    if (info) *info = (wlgen_info_t){index, stratum, is_short, target_s};
    return 0;
}

int wlgen_write(FILE *f, const wlgen_set_t *set, const wlgen_info_t *info, const rf_workload_t *w)
{
    fprintf(f, "# odsim workload gen --set %s: index %u, seed %llu, step target %.0f us at the nominal rates%s\n",
            set->name, info->index, (unsigned long long)w->seed, info->target_s * 1e6,
            info->short_step ? " (short, a sync inside every session)" : "");
    return rf_write(f, w);
}
