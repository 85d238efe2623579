/* cfg — the strict YAML reader every odsim folder uses (scenarios, catalogs, profiles, generator
 * configs).
 *
 * libyaml parses; cfg builds a small tree of maps, sequences and scalars that remembers where every
 * node came from (file, 1-based line and column, and its key path such as `gpu.link.h2d_GBps`), and
 * is strict where libyaml is lenient: duplicate keys, non-scalar keys, anchors, aliases, merge keys
 * (`<<`) and multi-document streams are errors. Unknown keys are rejected when a map is bound with
 * cfg_bind (or checked with cfg_check_consumed), so a misspelled key never passes silently.
 *
 * Preset + overrides (libyaml has none): cfg_merge overlays one tree on another (maps merge key by key,
 * anything else is replaced); cfg_set applies a `--set a.b.c=value` override. Nodes keep the position
 * of the text they came from, so an error in an override points at the override.
 *
 * Every error message has the form `FILE:LINE:COL: key 'a.b': what is wrong`. */
#ifndef ODSIM_COMMON_CFG_H
#define ODSIM_COMMON_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "common/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cfg_doc cfg_doc_t;   /* owns every node and string of a tree */
typedef struct cfg_node cfg_node_t; /* a node; lives as long as its document */

typedef enum { CFG_SCALAR, CFG_MAP, CFG_SEQ } cfg_kind_t;

/* ---- loading ------------------------------------------------------------------------------ */

/* The largest YAML file read (scenarios, catalogs, calibration profiles, generator configs): config
 * files are small, anything larger is a mistake, not a config; reading stops there with an error. */
#define CFG_MAX_FILE_BYTES (64u << 20)

/* Parses a YAML file into a new document (*out, free with cfg_free). An empty file gives a document
 * whose root is an empty map. Errors: ERR_IO, ERR_PARSE (with file:line:col), ERR_NOMEM. */
int cfg_parse_file(const char *path, cfg_doc_t **out, err_t *e);

/* As cfg_parse_file, from memory; `name` stands for the file name in messages. */
int cfg_parse_string(const char *name, const char *text, size_t len, cfg_doc_t **out, err_t *e);

/* Frees a document and all its nodes. doc may be NULL. */
void cfg_free(cfg_doc_t *doc);

/* The root node (never NULL for a parsed document). */
cfg_node_t *cfg_root(const cfg_doc_t *doc);

/* A deep copy of doc (consumed marks reset). Errors: ERR_NOMEM. */
int cfg_clone(const cfg_doc_t *doc, cfg_doc_t **out, err_t *e);
/* As cfg_clone, less the root map's `key` (a study's point documents without its sweep: copying a
 * sweep of n values for each of n points would be O(n^2)). Errors: ERR_NOMEM. */
int cfg_clone_without(const cfg_doc_t *doc, const char *key, cfg_doc_t **out, err_t *e);

/* ---- preset + overrides ------------------------------------------------------------------- */

/* Returns in *out a new document: `base` with `overlay` laid over it. Maps merge key by key,
 * recursively; scalars and sequences in overlay replace base's. The inputs are not modified. When
 * `strict` is true, a key in overlay that base lacks is an error (ERR_INVAL naming the overlay's
 * position): overrides may only change what the preset declares. Errors: ERR_INVAL (a map laid over
 * a non-map or the reverse), ERR_NOMEM. */
int cfg_merge(const cfg_node_t *base, const cfg_node_t *overlay, bool strict, cfg_doc_t **out,
              err_t *e);

/* Applies `path=value` to doc: path is dot-separated keys (`gpu.link.h2d_GBps`), value is YAML flow
 * text (`12.5`, `pcie4`, `[1, 2, 4]`, `{a: 1}`). Intermediate maps are created as needed; an existing
 * node is replaced. `origin` names the override in error messages (e.g. "--set"). Errors: ERR_INVAL
 * (no '=', empty key, a path through a scalar or sequence), ERR_PARSE (value not YAML). */
int cfg_set(cfg_doc_t *doc, const char *assignment, const char *origin, err_t *e);

/* Replaces the node at `path` (dot-separated) with a copy of `value`. Same errors as cfg_set. */
int cfg_set_node(cfg_doc_t *doc, const char *path, const cfg_node_t *value, err_t *e);

/* ---- reading the tree --------------------------------------------------------------------- */

cfg_kind_t cfg_kind(const cfg_node_t *n);
/* Number of entries of a map or sequence; 0 for a scalar. */
size_t cfg_size(const cfg_node_t *n);
/* Entry i of a map (its value) or a sequence; NULL when i is out of range. Marks a map key consumed. */
cfg_node_t *cfg_at(const cfg_node_t *n, size_t i);
/* Key i of a map; NULL for other kinds or out of range. */
const char *cfg_key_at(const cfg_node_t *map, size_t i);
/* The value of `key` in map, or NULL when absent or when map is not a map. Marks the key consumed. */
cfg_node_t *cfg_get(const cfg_node_t *map, const char *key);
/* The value at a dot-separated path from n, or NULL. Marks each key consumed. */
cfg_node_t *cfg_path(const cfg_node_t *n, const char *path);
/* A scalar's text; NULL for maps and sequences. */
const char *cfg_str(const cfg_node_t *n);
/* True when the scalar was quoted in the source (quoted text is never a number or bool). */
bool cfg_quoted(const cfg_node_t *n);
/* Position of a node: file name, 1-based line and column, and its key path ("" for the root;
 * sequence items as `a.b[2]`). */
const char *cfg_file(const cfg_node_t *n);
int cfg_line(const cfg_node_t *n);
int cfg_col(const cfg_node_t *n);
const char *cfg_keypath(const cfg_node_t *n);

/* Sets e to `FILE:LINE:COL: key 'PATH': <message>` and returns code. */
int cfg_error(err_t *e, int code, const cfg_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- typed scalars (each error names file:line:col and key) -------------------------------- */

/* A finite number (plain decimal or exponent notation). Errors: ERR_INVAL. */
int cfg_double(const cfg_node_t *n, double *out, err_t *e);
/* An integer, optionally with a decimal (k, M, G) or binary (Ki, Mi, Gi) suffix: `1Mi` = 1048576.
 * Errors: ERR_INVAL, ERR_RANGE (overflow). */
int cfg_int64(const cfg_node_t *n, int64_t *out, err_t *e);
/* A byte size: a number with an optional B, kB, MB, GB, TB, KiB, MiB, GiB, TiB suffix. */
int cfg_bytes(const cfg_node_t *n, double *out, err_t *e);
/* A duration in seconds: a number with an optional ns, us, ms, s, min, h suffix. */
int cfg_seconds(const cfg_node_t *n, double *out, err_t *e);
/* true/false/yes/no/on/off (unquoted). */
int cfg_bool(const cfg_node_t *n, bool *out, err_t *e);

/* ---- declarative binding (Ramulator-style: every parameter declared with default and meaning) -- */

typedef enum {
    CFG_T_DOUBLE,  /* double */
    CFG_T_INT,     /* int64_t */
    CFG_T_BOOL,    /* bool */
    CFG_T_STRING,  /* const char * (points into the document or at the default literal) */
    CFG_T_ENUM,    /* int: index into `choices` */
    CFG_T_BYTES,   /* double bytes */
    CFG_T_SECONDS, /* double seconds */
    CFG_T_NODE     /* const cfg_node_t * (NULL when absent and no default): read by the caller */
} cfg_type_t;

typedef struct cfg_param {
    const char *key;
    cfg_type_t type;
    size_t offset;               /* offsetof(target struct, field) */
    const char *dflt;            /* default as YAML scalar text; NULL: the key is required */
    double min, max;             /* inclusive bounds for numeric types; ignored when min > max */
    const char *const *choices;  /* CFG_T_ENUM: NULL-terminated list of names; CFG_T_DOUBLE and
                                  * CFG_T_SECONDS: words accepted besides a number, each binding NAN
                                  * (the caller tells them apart with cfg_get), or NULL */
    const char *doc;             /* meaning, with unit */
} cfg_param_t;

/* Binds map's keys into *obj according to params[0..n): converts, range-checks, applies defaults for
 * absent keys, and rejects keys of map that no param declares (ERR_INVAL, naming the unknown key and
 * the nearest declared one). map may be NULL (all defaults; required keys then fail). Errors name the
 * file, line, column and key. */
int cfg_bind(const cfg_node_t *map, const cfg_param_t *params, size_t n, void *obj, err_t *e);

/* Fails (ERR_INVAL, naming file:line:col and key) when map has a key no cfg_get/cfg_at consumed. */
int cfg_check_consumed(const cfg_node_t *map, err_t *e);

/* Writes the declared parameters as a table (key, type, default, range, meaning) to fp: the
 * documentation users read with `odsim params`. */
void cfg_params_describe(FILE *fp, const char *section, const cfg_param_t *params, size_t n);

/* While set (fn not NULL), cfg_params_describe hands each section's table to fn instead of printing
 * it (`odsim params --json` collects them); NULL restores printing. One caller at a time. */
typedef void (*cfg_params_receiver)(void *arg, const char *section, const cfg_param_t *params, size_t n);
void cfg_params_receive(cfg_params_receiver fn, void *arg);
/* The type's name as `odsim params` prints it (number, integer, bool, text, choice, bytes, seconds, map). */
const char *cfg_type_name(cfg_type_t t);

/* ---- writing ------------------------------------------------------------------------------ */

/* Writes n as block YAML to fp, keys in document order, indented by `indent` spaces. Scalars are
 * quoted when needed so the output parses back to the same tree. */
void cfg_emit(const cfg_node_t *n, FILE *fp, int indent);

#ifdef __cplusplus
}
#endif
#endif
