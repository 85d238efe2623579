/* study — a scenario assembled into simulations: the one place where catalogs, calibration, LLM
 * shapes, methods (plan providers), workloads and the engine meet. `odsim run`, `odsim capacity` and
 * `odsim validate` all go through it, so a validation prediction is made exactly as a study's.
 *
 * A scenario (a YAML file under scenarios/; every key documented by `odsim params`):
 *
 *   name: default
 *   hardware:  {box: h200-1, gpu: ..., link: pcie5, tier: ..., gpus: 1, set: {h2d_GBps: 60}}
 *   calibration: models/calib/h200.yaml     # fitted profile; names it lacks come from the presets
 *   catalog:   models/catalog               # hardware, LLM and quality catalogs (not swept)
 *   model:     {name: qwen3-8b, kv_dtype: bf16, weights_dtype: bf16, set: {layers: 1}}
 *   method:    {name: fathom, budget: 56, k: 2048, ...}   # models' method parameters
 *   serving:   {mode: streams, cuda_graphs: false, max_batch: 0, prefill_chunk: 2048,
 *               admission: reserve, placement: round_robin}
 *   workload:  {kind: generator | trace | probe, ...}
 *   slo:       {ttft_s: 2, tokens_per_s: 20, step_p99_s: 0.1}
 *   run:       {duration_s: 600 | auto, seed: 1, replications: 3, warmup_s: 0 | auto, steady_turns: 10,
 *               max_duration_s: 1h, ci_target: 0.05, max_replications: 20}   # docs/scenarios.md
 *   sweep:     {method.name: [dense, fathom], hardware.link: [pcie4, pcie5]}
 *   classes:   [{name: decode, share: 0.75}, {name: prefill, share: 0.25, method: {...},
 *               workload: {generator: {...}}}]     # session classes side by side (docs/scenarios.md)
 *
 * Sweep axes are any keys with a list of values; the points are their cross product, in the order
 * the axes are written (the last axis varies fastest). `--set key=value` overrides apply before
 * sweeps. Unknown or duplicate keys, wrong types and impossible values are errors naming
 * file:line:column and key.
 *
 * A `probe` workload reproduces one measured case (validation): a single op, one layer's step, or N
 * sessions looping steps under a serving mode, so measured kbench rows are predicted through the
 * same providers and engine as a study. */
#ifndef ODSIM_CLI_STUDY_H
#define ODSIM_CLI_STUDY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "common/cfg.h"
#include "common/err.h"

typedef struct study study_t;

/* The data root holds the catalogs (models/catalog/), the calibration profiles (models/calib/) and
 * the traces: $ODSIM_ROOT when set, else the current directory when it holds models/catalog, else
 * the directory two levels above the executable (an installed or built odsim; docs/data-root.md).
 * Every command finds its data this way. */
#define STUDY_DEFAULT_CALIBRATION "models/calib/h200.yaml"
#define STUDY_DEFAULT_CATALOG "models/catalog"

/* The path of data file `rel`: as given when it exists or is absolute, else under the data root.
 * Returns a new string (NULL: out of memory). */
char *study_data_path(const char *rel);

/* Loads a scenario file (a relative path that is not here is looked up under the data root),
 * applies `--set` overrides (each "key=value"), resolves no point yet but checks every key and
 * every sweep value (each beside the other axes' first values: a value bad only beside another
 * axis's value fails when that point runs, naming the point). On success *out owns everything.
 * Errors: ERR_IO, ERR_PARSE, ERR_INVAL
 * (file:line:col and key), ERR_NOMEM. */
int study_open(const char *path, const char *const *sets, size_t n_sets, study_t **out, err_t *e);
/* As study_open from a parsed document, which the study takes over (also on error). `name` names
 * the scenario in reports. */
int study_open_doc(cfg_doc_t *doc, const char *name, study_t **out, err_t *e);
void study_free(study_t *s);
/* How many points' methods s has built (the costly part of resolving a point): opening builds one
 * per distinct method, model and probe among the axis values, each study_run one more. */
size_t study_methods_built(const study_t *s);

/* The path of `file` in the study's catalog directory (scenario key `catalog`); "" gives the
 * directory itself. Returns a new string (NULL: out of memory). */
char *study_catalog_file(const study_t *s, const char *file);

/* Number of sweep points (1 without a sweep) and a label for point i ("method.name=fathom
 * hardware.link=pcie4", or "base"). */
size_t study_n_points(const study_t *s);
const char *study_point_label(const study_t *s, size_t i);
/* The resolved scenario of point i as YAML (recorded in every output). */
void study_point_emit(const study_t *s, size_t i, FILE *fp);

/* A statistic over the replications: their mean and a 95% confidence interval (Student t over the
 * replication means; lo = hi = mean with one replication). */
/* A figure over replications: its mean and Student-t 95% interval (not clamped: a bound past what the
 * figure can be says the replications are too few), over the n replications that gave a sample.
 * NAN where none did (mean) or fewer than two did (lo, hi): printed "n/a", JSON null. */
typedef struct study_stat {
    double mean, lo, hi;
    uint32_t n;
} study_stat_t;

/* The figure over x[0..n) (NAN entries: replications without a sample). */
study_stat_t study_stat_of(const double *x, size_t n);

typedef struct study_res_use {
    char *name;           /* resource name, e.g. "gpu0.h2d" */
    char *unit;
    double capacity;      /* units/s */
    double utilisation;   /* time-weighted mean over the run, 0..1 (first replication) */
    double work;          /* units carried (first replication) */
} study_res_use_t;

typedef struct study_lost {
    char *name;           /* a resource, or "cap", "launch", "timeslice" */
    double per_step_s;    /* mean time lost per plan to it (Σ over the plan's ops) */
} study_lost_t;

/* One session class's figures (scenario key `classes`): the same statistics as the whole study's,
 * over its sessions alone. */
typedef struct study_class_result {
    char *name;
    double share;
    char *method;                      /* its method's name (the scenario's when it has none of its own) */
    study_stat_t step_p50_s, step_p95_s, step_p99_s, step_mean_s;
    study_stat_t ttft_p50_s, ttft_p95_s, ttft_p99_s;
    study_stat_t prefill_p50_s, prefill_p99_s;
    study_stat_t tps_session_mean;     /* decode tokens/s per session of the class */
    study_stat_t tps_total;            /* the class's decode tokens/s on the box */
    study_stat_t slo_attainment;
    bool slo_met;                      /* the SLO holds for the class in >= 95% of replications */
    uint64_t decode_tokens, prefill_tokens, sessions, turns; /* first replication */
    uint64_t preemptions, evictions, waiting;
} study_class_result_t;

/* Each replication's own figures (study_result_t.rep_figs), in this order. */
enum { STUDY_REP_DURATION_S, STUDY_REP_WARMUP_S, STUDY_REP_MEAN_TURN_S, STUDY_REP_WINDOW_TURNS, STUDY_REP_STEP_P50_S,
       STUDY_REP_STEP_P99_S, STUDY_REP_TTFT_P50_S, STUDY_REP_TTFT_P99_S, STUDY_REP_TPS_SESSION, STUDY_REP_N };

typedef struct study_result {
    char *label;
    uint32_t replications;
    double duration_s;                 /* simulated time of each replication (duration auto: of the first) */
    double simulated_s;                /* simulated time of all replications together */
    bool duration_auto;                /* run.duration_s: auto: each replication ran until steady or its cap */
    bool transient;                    /* auto: a replication's window fell short of run.steady_turns mean
                                        * turns (it reached run.max_duration_s, or its work ran out); the
                                        * point then never meets the SLO */
    double steady_turns;               /* run.steady_turns */
    double window_turns;               /* the fewest mean turn durations a replication's measured window
                                        * spanned (0: no turn) */
    double ci_target;                  /* run.ci_target (0: off) */
    bool ci_reached;                   /* the headline figures' intervals are within ±ci_target of them */
    double *rep_figs;                  /* replications × STUDY_REP_N: each replication's own figures (NAN:
                                        * no sample) */
    study_stat_t step_p50_s, step_p95_s, step_p99_s, step_mean_s;
    study_stat_t ttft_p50_s, ttft_p95_s, ttft_p99_s;
    study_stat_t prefill_p50_s, prefill_p99_s; /* prefill chunk latency (NAN: no chunk ran) */
    study_stat_t tps_session_mean;     /* decode tokens/s per session */
    study_stat_t tps_total;            /* decode tokens/s of the box */
    study_stat_t slo_attainment;       /* share of sessions (or turns) meeting every SLO, 0..1 */
    bool slo_met;                      /* the SLO holds in ≥ 95% of replications (with classes: for the
                                        * whole and for every class) */
    uint64_t decode_tokens, prefill_tokens, sessions, turns; /* first replication */
    uint64_t preemptions, evictions, waiting; /* waiting: for memory at the end */
    double admit_wait_p50_s, admit_wait_p99_s; /* NAN: no session arrived; with admit_never > 0 lower bounds */
    uint64_t admit_never;              /* sessions not admitted by the end (first replication) */
    double standalone_step_s;          /* idle-machine latency of a plan, mean over plans */
    double hbm_peak_bytes, host_peak_bytes, hbm_capacity_bytes, host_capacity_bytes;
    double cxl_peak_bytes, cxl_capacity_bytes;  /* the box's memory tier (0: none) */
    double launch_utilisation;         /* launch-thread busy share (per thread) */
    study_res_use_t *res;
    size_t n_res;
    study_lost_t *lost;
    size_t n_lost;
    char *binding;                     /* the resource with the highest utilisation */
    char *placement;                   /* how sessions were placed on a box of several GPUs; NULL: one GPU */
    char *flags;                       /* calibration parameters assumed or used outside their
                                        * fitted range, one per line; "" when none */
    char clamps[1024];                 /* of those outside their range, the ones whose cost term clamps
                                        * (calib_clamp_list: what odsim validate clamps), comma-separated */
    uint64_t calib_hash;
    uint64_t events;                   /* engine events over all replications */
    double wall_s;                     /* wall-clock seconds the replications took (not in reports:
                                        * outputs stay byte-identical; see odsim run --timing) */
    /* Samples for plots (first replication): (context tokens, step latency s) of decode steps,
     * at most 4096 evenly thinned; utilisation of each resource per interval. */
    double *ctx_tokens, *ctx_step_s;
    size_t n_ctx;
    double *util_t_s;                  /* n_util interval ends */
    double *util;                      /* n_util × n_res, row-major */
    size_t n_util;
    study_class_result_t *classes;     /* per session class, in the scenario's order (n_classes 0: none) */
    size_t n_classes;
} study_result_t;

typedef struct study_opts {
    int replications;     /* run exactly this many replications (0: the scenario's, with its ci_target) */
    bool progress;        /* progress bar on stderr */
    const char *timeline_path; /* write the first plans as Chrome trace-event JSON (NULL: none) */
    uint32_t timeline_plans;
    uint32_t sessions;    /* capacity search: override the closed population (0: keep) */
    double arrival_scale; /* capacity search: scale arrival rates (0: keep) */
    const char *clamp;    /* calibration parameters whose uses are clamped into their range, comma-separated
                           * (calib_clamp: odsim validate's flags); NULL: none */
} study_opts_t;

/* Simulates sweep point i. *out is a new result (free with study_result_free). Errors: anything a
 * catalog, provider or the engine reports (ERR_INFEASIBLE for a configuration that cannot run, with
 * its numbers), ERR_NOMEM. */
int study_run(study_t *s, size_t i, const study_opts_t *opts, study_result_t **out, err_t *e);
void study_result_free(study_result_t *r);

/* odsim's version, the calibration hash and the resolved scenario, as comment lines ("# ...")
 * for CSV and text outputs. */
void study_provenance(const study_t *s, size_t i, FILE *fp, const char *comment);

#endif
