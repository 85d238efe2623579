/* calib — the calibration profile: a store of named cost-model and hardware parameters.
 *
 * A profile (models/calib/<platform>.yaml, written by the fitter in validation/) is
 *
 *     profile: h200-pcie5-vm          # free text
 *     hardware: h200-sxm/pcie5        # free text: what it was measured on
 *     platform: {gpu: h200-sxm, link: pcie5, host: h200-1, virtualisation: "..."}
 *                                     # the same as catalog presets (optional: models/platform.h
 *                                     # carries the parameters to other hardware by its rules)
 *     params:
 *       ce_latency_us: {value: 4.9, stderr: 0.05, lo: 4096, hi: 268435456, unit: us,
 *                       origin: "fitted: validation/data/ce_h2d.csv"}
 *
 * Names are exactly the catalog parameter keys (models/hwcat.h): a profile may set any of them and
 * nothing else (an unknown name is an error naming file:line:col and key). Names a profile lacks are
 * seeded from the resolved hardware preset (calib_seed), with the preset's origin.
 *
 * `lo`/`hi` bound the predictor over which the value was measured or fitted (bytes of a piece, bytes
 * of a region, blocks in flight, as the parameter's cost form says); lo > hi means no range. Every
 * prediction notes which parameters it used (calib_note): the profile remembers those used outside
 * their range or whose origin is "assumed", for reports.
 *
 * Parameter names (units in the name), bounds and meanings are declared once: the cost forms' in
 * models/cost_params.c (beside models/cost.h's formulas), the hardware facts' in models/hwcat.c
 * (on a link or GPU the profile was not measured on, models/platform.h derives the link's);
 * `odsim params` prints both. */
#ifndef ODSIM_MODELS_CALIB_H
#define ODSIM_MODELS_CALIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "common/err.h"
#include "models/hwcat.h"

typedef struct calib calib_t;

typedef struct calib_param {
    const char *name;
    double value;
    double stderr_v;   /* 0 when unknown */
    double lo, hi;     /* predictor range; lo > hi: none */
    const char *unit;
    const char *origin;
} calib_param_t;

/* An empty profile. Errors: ERR_NOMEM. */
int calib_new(calib_t **out, err_t *e);
/* Loads a profile file. Errors: ERR_IO, ERR_PARSE, ERR_INVAL (unknown name, unit not the name's,
 * missing value or origin: file:line:col and key), ERR_NOMEM. */
int calib_load(const char *path, calib_t **out, err_t *e);
/* As calib_load from text; `name` stands for the file name. */
int calib_load_string(const char *name, const char *text, calib_t **out, err_t *e);
void calib_free(calib_t *c);

/* Sets (adds or replaces) a parameter; strings are copied. Errors: ERR_INVAL (unknown name), ERR_NOMEM. */
int calib_set(calib_t *c, const calib_param_t *p, err_t *e);
/* Adds every numeric parameter of hw that the profile lacks, with the preset's value and origin.
 * Errors: ERR_NOMEM. */
int calib_seed(calib_t *c, const hw_t *hw, err_t *e);

/* The parameter called name, or NULL. */
const calib_param_t *calib_find(const calib_t *c, const char *name);
/* Its value; ERR_NOTFOUND (naming it) when absent. */
int calib_get(const calib_t *c, const char *name, double *out, err_t *e);

/* Records that a prediction used `name` with predictor x (NAN: no predictor). Remembered when x lies
 * outside [lo, hi] or the origin starts with "assumed". c NULL: nothing is noted (a cost weighed,
 * not predicted), and so for calib_note_outside. */
void calib_note(calib_t *c, const char *name, double x);
/* Records that a prediction extrapolated `name` beyond what was measured (e.g. a region past the last
 * knot). */
void calib_note_outside(calib_t *c, const char *name);
/* Forgets every note. */
void calib_notes_reset(calib_t *c);

/* Clamping (odsim validate's flags, docs/calibration.md): from now on the uses of each parameter of
 * the comma-separated `names` are evaluated at their predictor clamped into the parameter's [lo, hi]
 * (a cost form asks calib_x or calib_clamped). Errors: ERR_NOTFOUND (naming the parameter). */
int calib_clamp(calib_t *c, const char *names, err_t *e);
/* Whether the uses of `name` are clamped (calib_clamp, and it has a range); marks that the caller's
 * form can be clamped (calib_flag_t.clamps). c NULL: false. */
bool calib_clamped(calib_t *c, const char *name);
/* The predictor x of a use of `name` a cost form computes its term with: x, or x clamped into
 * [lo, hi] when `name` is clamped (calib_clamped). NAN stays NAN. */
double calib_x(calib_t *c, const char *name, double x);

typedef struct calib_flag {
    const char *name;
    const char *origin;
    bool assumed;        /* origin says assumed */
    uint64_t uses;       /* predictions that used it */
    uint64_t outside;    /* of which outside its range */
    double x_min, x_max; /* predictor values seen (NAN when none) */
    double lo, hi;
    bool clamps;         /* its cost form reads the predictor through calib_x: clamping it into [lo, hi]
                          * can move a prediction (otherwise the term does not vary with it there) */
} calib_flag_t;

/* Number of flagged parameters (assumed or used outside their range), and flag i of them in
 * name order. Returns false when i is out of range. */
size_t calib_flag_count(const calib_t *c);
bool calib_flag_at(const calib_t *c, size_t i, calib_flag_t *out);
/* Writes the flags as text lines to fp. */
void calib_flags_print(const calib_t *c, FILE *fp);
/* The flagged parameters used outside their range whose form can be clamped (calib_flag_t.clamps),
 * comma-separated in name order into buf ("" none; names that do not fit are left off). */
void calib_clamp_list(const calib_t *c, char *buf, size_t len);

/* Where a profile was measured: catalog preset names (gpus.yaml, links.yaml, boxes.yaml) and the
 * host's virtualisation. */
typedef struct calib_platform {
    const char *gpu, *link, *host, *virtualisation;
} calib_platform_t;

/* The profile's declared platform, or NULL when it declares none (presets, older profiles). */
const calib_platform_t *calib_platform(const calib_t *c);
/* The profile's name ("presets" when it has none). */
const char *calib_profile(const calib_t *c);

/* FNV-1a 64 of the profile text loaded (0 for a profile built in memory), for reports. */
uint64_t calib_hash(const calib_t *c);
/* Number of parameters and parameter i (NULL when out of range). */
size_t calib_count(const calib_t *c);
const calib_param_t *calib_at(const calib_t *c, size_t i);

#endif
