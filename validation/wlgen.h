/* wlgen — seeded random replay workloads (docs/replay.md) for the `random_dev` and sealed `random`
 * validation sets of issue 34.
 *
 * Every distribution is a parameter declared once (key, default, unit, range, meaning) in wlgen.c's
 * table, printed by `odsim params replay`; the generator reads its values only through that table
 * (wlgen_params_default), so what is printed is what is drawn. The sets, their names and seeds are
 * constants here (wlgen_set_find), fixed before anything was measured (validation/workloads/README.md).
 *
 * Workload i of a set is drawn from its seed alone (xoshiro256** seeded by splitmix64), so
 * `odsim workload gen` rewrites the committed files byte for byte. Stratified by i: mode = i % 3
 * (procs, streams, batched), session stratum = (i / 3) % 3 ({1}, {2..sessions_mid_max},
 * {sessions_mid_max+1..sessions_max}), and the block of nine i / 9 is short when it is 0 modulo
 * short_one_in; so each block of nine holds every mode x stratum pair once. */
#ifndef ODSIM_VALIDATION_WLGEN_H
#define ODSIM_VALIDATION_WLGEN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "kernels/replay_fmt.h"

enum { WLGEN_STRATA = 3 }; /* session strata: 1, 2..4, 5..16 sessions */

/* The declared parameters (wlgen.c's table is the only place with their values). Sizes are bytes,
 * times seconds, rates per second. The nominal rates only size ops: they are not odsim's calibrated
 * model. */
typedef struct wlgen_params {
    int64_t sessions_mid_max, sessions_max, short_one_in;
    double step_min_s, short_step_max_s, step_max_s, sync_prob_long;
    int64_t streams_max, ops_min, ops_max;
    double op_min_share_s;
    double region_min_bytes, region_cap1_bytes, region_cap2_bytes, region_cap3_bytes;
    double idle_prob, idle_min_s, idle_max_s;
    double host_prob, host_min_s, host_max_s;
    double w_h2d, w_d2h, w_h2d2d, w_h2dbatch, w_gather, w_hbm, w_compute, w_spin, w_sync;
    double piece_min_bytes, piece_max_bytes;
    int64_t plain_pieces_max;
    double after_prob;
    double hbm_min_bytes, compute_min_flops, spin_min_s, spin_max_s;
    double ce_Bps, gather_Bps, gather_small_below_bytes, gather_small_pieces_per_s, hbm_Bps, compute_flops_per_s,
        call_s;
    double window_min_s, window_steps, window_max_s;
    int64_t min_steps, warmup_steps;
} wlgen_params_t;

/* A committed set: workload i is named PREFIX-%04d and drawn from seed seed0 + i. */
typedef struct wlgen_set {
    const char *name;   /* `--set NAME` */
    const char *prefix; /* file and workload names */
    uint32_t count;
    uint64_t seed0;
    bool sealed;        /* validated once, when issue 34 closes */
} wlgen_set_t;

/* What the generator chose for one workload beyond what the file says. */
typedef struct wlgen_info {
    uint32_t index, stratum; /* stratum: 0 one session, 1 the middle, 2 the most */
    bool short_step;         /* target <= short_step_max_s, with a sync inside every session's step */
    double target_s;         /* the step's target time at the nominal rates */
} wlgen_info_t;

/* The set named name (random_dev, random), or NULL. */
const wlgen_set_t *wlgen_set_find(const char *name);

/* Fills *p with the declared defaults. Errors: ERR_INVAL/ERR_RANGE (a default outside its declared
 * range: a defect of the table). */
int wlgen_params_default(wlgen_params_t *p, err_t *e);

/* Prints the parameter table (key, type, default, range, meaning) for `odsim params replay`. */
void wlgen_describe(FILE *fp);

/* Draws workload `index` of set into *w (overwritten) and, when info is non-NULL, what it chose into
 * *info. The result satisfies docs/replay.md's bounds. Errors: ERR_RANGE (index >= set->count). */
int wlgen_make(const wlgen_params_t *p, const wlgen_set_t *set, uint32_t index, rf_workload_t *w,
               wlgen_info_t *info, err_t *e);

/* Writes the workload file: a comment naming the set, index, seed and target, then rf_write's
 * canonical form. Returns 0, or -1 when the stream reports an error. */
int wlgen_write(FILE *f, const wlgen_set_t *set, const wlgen_info_t *info, const rf_workload_t *w);

/* An op's time at the nominal rates, s: API calls (one per piece for h2d and d2h, else one; none for
 * sync and host) plus bytes, pieces or FLOPs over their rate, or the op's own microseconds. */
double wlgen_op_nominal_s(const wlgen_params_t *p, const rf_op_t *o);

/* Whether the session's step holds a sync between its first and last ops (a host wait that splits the
 * step, besides the final one). */
bool wlgen_sync_inside(const rf_session_t *s);

#endif
