/* study_cfg — a scenario's sections bound into plain structs (private to cli/study*.c).
 *
 * Every key is declared once here with its default and meaning (`odsim params` prints them);
 * sub-sections read by other modules (hardware, model, method, generator, probe) are kept as nodes
 * and bound by their owners, who reject unknown keys the same way. */
#ifndef ODSIM_CLI_STUDY_CFG_H
#define ODSIM_CLI_STUDY_CFG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "common/cfg.h"
#include "common/err.h"

typedef struct scn_top {
    const char *name, *description, *calibration, *catalog;
    const cfg_node_t *hardware, *model, *method, *serving, *workload, *slo, *run, *sweep, *classes;
} scn_top_t;

typedef struct scn_model {
    const char *name;
    const cfg_node_t *set;         /* shape overrides */
} scn_model_t;

typedef struct scn_serving {
    int mode;                      /* exec_mode_t */
    bool cuda_graphs, coarse;
    int64_t max_batch, prefill_chunk;
    double coarse_reuse;
    int admission;                 /* exec_admit_t */
    int placement;                 /* SCN_PLACE_* */
    int64_t hw_queues;             /* hardware work queues per CUDA context (0: one per stream) */
    bool gathers_exclusive;        /* SM gathers and other kernels take the GPU in turns */
    int session_streams;           /* SCN_STREAMS_* */
    int latency_from;              /* SCN_LATENCY_* */
} scn_serving_t;

enum { SCN_STREAMS_MANY = 0, SCN_STREAMS_ONE = 1 };
enum { SCN_LATENCY_BEGIN = 0, SCN_LATENCY_DEVICE = 1 };

enum { SCN_PLACE_SPREAD_UPLINKS = 0, SCN_PLACE_PACK = 1, SCN_PLACE_ROUND_ROBIN = 2 };
enum { SCN_WL_GENERATOR = 0, SCN_WL_TRACE = 1, SCN_WL_PROBE = 2 };
enum { SCN_REPLAY_CLOSED = 0, SCN_REPLAY_OPEN = 1 };

typedef struct scn_workload {
    int kind;                      /* SCN_WL_* */
    int replay;                    /* SCN_REPLAY_* */
    const char *trace;             /* kind trace: an odsim trace file (.pb) */
    const char *import_format;     /* kind trace: or a raw public trace imported on the fly */
    const char *import_file;
    double scale;                  /* contexts stretched ×scale (1: as recorded) */
    int64_t scale_to;              /* or to this maximum context (0: off) */
    int64_t max_sessions;          /* replay at most this many sessions (0: all) */
    int64_t sessions_per_user;     /* closed generator: sessions drawn per user */
    const cfg_node_t *generator;   /* kind generator: traces/tracegen parameters */
    const cfg_node_t *probe;       /* kind probe */
} scn_workload_t;

typedef struct scn_slo {
    double ttft_s, tokens_per_s, step_p99_s, attainment;
} scn_slo_t;

typedef struct scn_run {
    double duration_s, warmup_s;   /* with duration_auto the cap (max_duration_s); with warmup_auto 0 */
    bool duration_auto, warmup_auto; /* `auto`: the run decides as it goes (cli/study_steady.c); a
                                   * warm-up is auto only with an auto duration (else 0 s) */
    double steady_turns, max_duration_s;
    double ci_target;              /* relative half-width of the headline intervals to reach (0: off) */
    int64_t max_replications;
    int64_t seed, replications;
    bool sample_calibration;
    bool jitter;                   /* ops' times vary as measured (jitter_us, jitter_rel) */
} scn_run_t;

typedef struct scn_probe {
    int what;                      /* SCN_PROBE_* */
    const char *op, *variant, *placement, *layout;
    int64_t n_tokens, heads, bits, k, batch, pieces, blocks, sessions, steps, streams;
    double piece_bytes, region_bytes, bytes;
    bool zero_copy, stage, launch_hidden;
} scn_probe_t;

enum { SCN_PROBE_OP = 0, SCN_PROBE_LAYER_STEP = 1, SCN_PROBE_SESSION_STEP = 2, SCN_PROBE_PREFILL_CHUNK = 3 };

/* A session class (scenario key `classes`): a share of the study's sessions that runs its own method
 * and workload beside the others (cli/study_class.c assigns sessions and keeps their statistics). */
#define SCN_MAX_CLASSES 64
typedef struct scn_class {
    const char *name;
    double share;                  /* of the sessions (closed: of the users), 0 < share <= 1 */
    const cfg_node_t *method;      /* its own method map (NULL: the scenario's, swept as it is) */
    const cfg_node_t *workload;    /* its workload section (only `generator`), or NULL */
    const cfg_node_t *generator;   /* overrides of workload.generator's session-shape keys, or NULL */
} scn_class_t;

/* Binds each section; errors name file:line:col and key. */
int scn_bind_top(const cfg_node_t *root, scn_top_t *out, err_t *e);
int scn_bind_model(const cfg_node_t *n, scn_model_t *out, err_t *e);
int scn_bind_serving(const cfg_node_t *n, scn_serving_t *out, err_t *e);
int scn_bind_workload(const cfg_node_t *n, scn_workload_t *out, err_t *e);
int scn_bind_slo(const cfg_node_t *n, scn_slo_t *out, err_t *e);
int scn_bind_run(const cfg_node_t *n, scn_run_t *out, err_t *e);
int scn_bind_probe(const cfg_node_t *n, scn_probe_t *out, err_t *e);
/* Binds the `classes` list n (NULL: no classes, *n_out 0) of a scenario whose workload is wl: each
 * class's keys, then the list's rules (one class or more, names unique, shares summing to 1; none
 * with a probe workload; generator overrides only with a generator workload and never of the
 * arrival keys). On success *out is a new array (free) of *n_out classes. */
int scn_bind_classes(const cfg_node_t *n, const scn_workload_t *wl, scn_class_t **out, size_t *n_out, err_t *e);

/* Prints every section's parameters (odsim params). */
void scn_describe(FILE *fp);

#endif
