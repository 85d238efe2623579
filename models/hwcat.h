/* hwcat — hardware catalogs: GPUs, host links, memory tiers behind the CPU, boxes.
 *
 * Files (models/catalog/): gpus.yaml, links.yaml, tiers.yaml, boxes.yaml. Each is a map of preset
 * name → map of parameters; every parameter is written `key: {value: V, origin: "..."}` (optionally
 * with `lo`, `hi`: the range of the predictor over which a measured or fitted value holds, and
 * `stderr`). `base: NAME` inherits every parameter the entry does not set from another entry of the
 * same file, with its origin rewritten "assumed: copied from NAME (...)". GPU entries group their
 * cost-model parameters under `costs:`. Unknown keys, duplicate keys, values out of range, missing
 * required keys and missing origins are errors naming file:line:col and key.
 *
 * Parameter keys are globally unique across the four catalogs and are exactly the names of the
 * calibration profile (models/calib.h), units in the name: `_GBps` 1e9 B/s, `_TFLOPS` 1e12 FLOP/s,
 * `_us`, `_ns`, `_Mps` 1e6 rows/s, `_bytes` bytes.
 *
 * Resolution: hw_resolve picks a box, its GPU (or another), the GPU's link (or another: a what-if),
 * the box's memory tier (or another, or none), and applies overrides: a flat map of parameter key →
 * value or {value, origin}; an override's origin defaults to "override at FILE:LINE". */
#ifndef ODSIM_MODELS_HWCAT_H
#define ODSIM_MODELS_HWCAT_H

#include <stdbool.h>
#include <stddef.h>
#include "common/cfg.h"
#include "common/err.h"

/* A declared parameter: key (unit in the name), type, unit, whether a preset must give it, its lower
 * bound (excluded for rates: > 0), meaning, and for a cost parameter the cost_t field it fills and
 * the scale to SI units (field -1: none; models/cost_params.c). */
typedef enum { HWP_NUM, HWP_BYTES, HWP_INT, HWP_TEXT } hwp_type_t;
typedef struct hw_param_def {
    const char *key;
    hwp_type_t type;
    const char *unit;
    bool required;
    double min;
    bool min_excl;
    const char *doc;
    ptrdiff_t field;
    double scale;
} hw_param_def_t;

typedef enum { HW_GPU = 0, HW_LINK, HW_TIER, HW_BOX, HW_KIND_COUNT } hw_kind_t;

/* One parameter with where its value came from. */
typedef struct hw_param {
    const char *key;   /* schema key (static storage) */
    const char *unit;  /* unit label (static storage), "" for names */
    double value;      /* numbers in the unit of the key; NAN for text parameters */
    char *text;        /* text parameters (names); NULL for numbers */
    char *origin;      /* "datasheet: ...", "measured: ...", "assumed: ...", "override at ..." */
    double lo, hi;     /* predictor range of a measured/fitted value; lo > hi when none */
    double stderr_v;   /* standard error, 0 when unknown */
} hw_param_t;

typedef struct hw_pset {
    hw_param_t *p;
    size_t n;
} hw_pset_t;

/* The parameter called key, or NULL. */
const hw_param_t *hw_pset_find(const hw_pset_t *ps, const char *key);

typedef struct hwcat hwcat_t;

/* Loads gpus.yaml, links.yaml, tiers.yaml and boxes.yaml from dir into a new catalog (free with
 * hwcat_free). Errors: ERR_IO, ERR_PARSE, ERR_INVAL, ERR_RANGE (file:line:col and key), ERR_NOMEM. */
int hwcat_load(const char *dir, hwcat_t **out, err_t *e);

/* An empty catalog, to fill with hwcat_load_file (tests, or catalogs in other places). */
int hwcat_new(hwcat_t **out, err_t *e);

/* Adds the entries of one catalog file of the given kind. Entry names must be new in that kind
 * (ERR_INVAL naming the position). Errors as hwcat_load. */
int hwcat_load_file(hwcat_t *cat, hw_kind_t kind, const char *path, err_t *e);

/* As hwcat_load_file, from text; `name` stands for the file name in messages. */
int hwcat_load_string(hwcat_t *cat, hw_kind_t kind, const char *name, const char *text, err_t *e);

void hwcat_free(hwcat_t *cat);

/* Number of entries of a kind and the name of entry i (NULL when out of range). */
size_t hwcat_count(const hwcat_t *cat, hw_kind_t kind);
const char *hwcat_name(const hwcat_t *cat, hw_kind_t kind, size_t i);
/* The parameters of entry `name` (inheritance resolved), or NULL when absent. */
const hw_pset_t *hwcat_entry(const hwcat_t *cat, hw_kind_t kind, const char *name);

/* A resolved machine: one box of `gpus` identical GPUs, their link, an optional tier. Byte and
 * rate fields are in SI units (bytes, B/s, FLOP/s); `params` holds every parameter of the four
 * presets with its origin, overrides applied, for the calibration defaults and for reports. */
typedef struct hw {
    char *box, *gpu, *link, *tier;   /* preset names; tier NULL when none */
    int gpus, gpus_per_switch, numa_nodes, sm_count;
    double host_dram_bytes, host_dram_Bps, hbm_reserve_bytes;
    double hbm_bytes, hbm_Bps, bf16_flops, fp8_flops;
    char *memory;                    /* "HBM3e", "GDDR6", ... */
    double h2d_Bps, d2h_Bps, duplex_Bps;   /* 0 where the link preset has no measured peaks */
    bool link_from_box;              /* the link's peaks are the box's own (its host's figures) */
    double cxl_read_Bps, cxl_write_Bps, cxl_bytes;  /* 0 without a tier */
    hw_pset_t params;
} hw_t;

/* What to resolve: a box, and optional replacements (NULL or 0: the box's own). `tier` may be
 * "none" to drop the box's tier. */
typedef struct hw_select {
    const char *box;
    const char *gpu;
    const char *link;
    const char *tier;
    int gpus;
} hw_select_t;

/* Resolves sel against cat into *out (free with hw_free), then applies `overrides` (a map of
 * parameter key → value or {value, origin}; may be NULL). Errors: ERR_NOTFOUND (unknown preset,
 * listing the known ones), ERR_INVAL/ERR_RANGE (an override: file:line:col and key), ERR_NOMEM. */
int hw_resolve(const hwcat_t *cat, const hw_select_t *sel, const cfg_node_t *overrides, hw_t *out,
               err_t *e);

/* As hw_resolve from a scenario map: `box:` (required), `gpu:`, `link:`, `tier:`, `gpus:`, and
 * `set:` (the overrides map). Unknown keys are errors. */
int hw_resolve_node(const hwcat_t *cat, const cfg_node_t *node, hw_t *out, err_t *e);

void hw_free(hw_t *hw);

/* The parameter called key of a resolved machine, or NULL. */
const hw_param_t *hw_param(const hw_t *hw, const char *key);

/* The unit label of catalog parameter `key` ("GB/s", "us", "B", "" for names), or NULL when no
 * catalog declares it: the set of valid calibration names. */
const char *hwcat_param_unit(const char *key);
/* True when `key` is a text parameter (a preset name), not a number. */
bool hwcat_param_is_text(const char *key);

/* Describes every catalog parameter (key, unit, required, range, meaning) to fp. */
void hwcat_describe(FILE *fp);
/* Calls fn for every catalog parameter, by file ("gpus.yaml", ..., then the GPU presets' cost
 * parameters under "gpus.yaml costs"), in hwcat_describe's order. */
void hwcat_describe_each(void (*fn)(void *arg, const char *file, const hw_param_def_t *def, bool checked), void *arg);

#endif
