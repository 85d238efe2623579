/* study_int — the parts of the study assembly shared by cli/study*.c (private). */
#ifndef ODSIM_CLI_STUDY_INT_H
#define ODSIM_CLI_STUDY_INT_H

#include "cli/study.h"
#include "cli/study_cfg.h"
#include "models/calib.h"
#include "models/cost.h"
#include "models/hwcat.h"
#include "models/llm.h"
#include "models/method.h"
#include "models/uplan.h"
#include "sim/exec.h"
#include "sim/sim.h"

typedef struct study_axis {
    const char *path;           /* dot path of the swept key (points into the document) */
    const cfg_node_t *values;   /* the list */
    size_t n;
} study_axis_t;

struct study {
    cfg_doc_t *doc;             /* the scenario with --set applied */
    char *name, *root;
    study_axis_t *axes;
    size_t n_axes, n_points;
    char **labels;
    hwcat_t *hwcat;
    llmcat_t *llmcat;
    uint64_t calib_hash;        /* of the last profile loaded */
    size_t methods_built;       /* points' methods built so far (study_methods_built) */
};

/* One sweep point, resolved: every section bound, presets looked up. */
typedef struct study_point {
    cfg_doc_t *doc;
    scn_top_t top;
    scn_model_t model;
    scn_serving_t serving;
    scn_workload_t wl;
    scn_slo_t slo;
    scn_run_t run;
    scn_probe_t probe;
    hw_t hw;
    llm_t llm;
    method_cfg_t mcfg;
    method_t *method;
    char *calib_path;           /* NULL: presets alone */
    scn_class_t *classes;       /* session classes (n_classes 0: none) */
    size_t n_classes;
    method_cfg_t *class_mcfg;   /* each class's own method (bound where classes[i].method) */
    uplan_t *uplan;             /* method.plan: the user plan, or NULL */
} study_point_t;

/* A trace file read as its sessions arrive (cli/study_rep.c). */
typedef struct study_stream study_stream_t;
void study_stream_free(study_stream_t *st);

/* One replication's simulation and what it measured. */
typedef struct study_rep {
    sim_t *sim;
    study_stream_t *stream;     /* the trace being replayed as it is read, or NULL */
    exec_t *x;
    calib_t *cal;
    cost_t cost;                /* the providers' cost forms; lives as long as the run */
    method_t *method;           /* shared by the sessions' providers (of classes without their own) */
    struct study_classes *classes; /* the session classes (cli/study_class.h), or NULL */
    const exec_stats_t *stats;
    double measured_s;          /* duration minus warm-up */
    uint64_t measured_tokens;   /* decode tokens after warm-up */
    uint64_t sessions;
    uint64_t *gpu_sessions;     /* sessions placed on each GPU */
    /* plot samples */
    double *ctx_tokens, *ctx_step_s;
    size_t n_ctx, cap_ctx;
    uint64_t ctx_seen;
    double *util_t_s, *util, *last_work;
    size_t n_util, cap_util, n_res;
    double util_dt_s;
    double warmup_s;            /* when the measured window began */
    uint64_t tokens_at_warmup;
    /* run.duration_s: auto (cli/study_steady.c) */
    const scn_run_t *run;
    bool warmed;                /* the measured window has begun */
    uint64_t turns_at_warmup;   /* turns done before it */
    bool steady;                /* the window reached run.steady_turns mean turns (the run stopped there) */
    double mean_turn_s;         /* at the end: the mean turn duration (NAN: no turn) */
    double window_turns;        /* at the end: measured_s over mean_turn_s (0: no turn) */
} study_rep_t;

/* The path of a data file: as given when it exists or is absolute, else under the data root. */
/* Finds the data root, the sweep axes and the points' labels of s (doc and name set). Errors:
 * ERR_INVAL (a bad axis), ERR_NOMEM. */
int study_sweep_init(study_t *s, err_t *e);
char *study_path(const study_t *s, const char *rel);
/* The document of point i: the scenario with each axis set to its value, with its sweep section or
 * without (resolving needs none) (caller frees). Errors: ERR_INVAL (a value that cannot be set), ERR_NOMEM. */
int study_point_doc(const study_t *s, size_t i, bool with_sweep, cfg_doc_t **out, err_t *e);

int study_catalogs_load(study_t *s, err_t *e);
void study_catalogs_free(study_t *s);
/* Resolves point i: every section bound, presets looked up, its method built. Errors: those of the
 * binders, catalogs and method (naming file, line and key), ERR_NOMEM. */
int study_point_resolve(study_t *s, size_t i, study_point_t *pt, err_t *e);
/* Checks every axis value against its parameter tables, the other axes at their first value: each
 * such point bound and its presets looked up, its method built once per distinct method, model and
 * probe. A value bad only beside another axis's value fails when that point runs. Errors: those of
 * study_point_resolve, prefixed with the point. */
int study_points_check(study_t *s, err_t *e);
void study_point_free(study_point_t *pt);

/* The calibration of point pt: its profile (or none), the scenario's what-ifs laid over it, the
 * names it lacks seeded from the presets. Records its hash in s. On success *out is a new profile. */
int study_calib_load(study_t *s, const study_point_t *pt, calib_t **out, err_t *e);

/* Runs replication k of reps of point pt. On success rep owns a finished simulation. */
int study_rep_run(study_t *s, const study_point_t *pt, uint32_t k, uint32_t reps, const study_opts_t *opts,
                  study_rep_t *rep, err_t *e);
void study_rep_free(study_rep_t *rep);

/* Starts rep's measured window now (the warm-up ends): every statistic forgets what came before. */
void study_rep_window_start(study_rep_t *rep);
/* run.duration_s: auto (cli/study_steady.c): schedules the checks that end the warm-up (warmup_s:
 * auto: once one mean turn duration has passed and a turn is done) and stop the run (sim_stop)
 * once the measured window spans run.steady_turns mean turn durations and holds as many finished
 * turns. Errors: ERR_NOMEM. */
int study_steady_start(study_rep_t *rep, err_t *e);
/* The mean turn duration of rep's box so far (NAN: no turn begun): the turns done and those in
 * progress, whose time so far counts, over the turns done (at least one). A run whose turns are still
 * under way is thus never cut short by the quick ones that finished first. */
double study_mean_turn_s(const study_rep_t *rep);

/* Fills the per-run parts of r (resources, time lost, memory, flags, samples) from replication 0. */
int study_result_fill(const study_t *s, const study_point_t *pt, const study_rep_t *rep, study_result_t *r, err_t *e);

/* The plan provider of an `op` probe (cli/study_probe.c): one op per plan. */
int study_probe_provider(const study_point_t *pt, const method_t *mt, calib_t *cal, plan_provider_t *out, err_t *e);

/* Seeds of replication k: workload and plans streams are separate and common to every point
 * (common random numbers across compared configurations). */
uint64_t study_seed(const study_point_t *pt, uint32_t k, int stream);
enum { STUDY_STREAM_WORKLOAD = 1, STUDY_STREAM_PLANS = 2, STUDY_STREAM_CALIB = 3, STUDY_STREAM_JITTER = 4,
       STUDY_STREAM_CLASS = 16 /* + class index: a class's own session generator */ };

#endif
