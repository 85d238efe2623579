/* method_ops — what makes an attention method a module: its table of operations (models/methods/<name>.c)
 * and the registry of methods (models/methods/registry.c), by which the rest of odsim knows them.
 *
 * A method's table gives what the generic forms of models/method.c switch on per method: its budget
 * rule (read and stored index bits, resolved against a model), its index's pieces per KV head, its
 * plane reads (methods keeping bit planes), its scan family, whether its reads depend on the query,
 * the selection its kernels were measured with, its default layout and index fetch path. A method's name is its key in scenarios, on
 * `odsim plan --method`, in the quality tables and in cost parameter names (scan_<family>_*).
 * Adding a method = its module, its row in the registry (or method_register at run time), its quality
 * rows (models/catalog/quality.yaml), its kernel and reference in kernels/, and tests. */
#ifndef ODSIM_MODELS_METHOD_OPS_H
#define ODSIM_MODELS_METHOD_OPS_H

#include <stdbool.h>
#include "common/err.h"
#include "models/fathom.h"
#include "models/llm.h"
#include "models/method.h"

/* What a method's budget rule resolves for a model: the index it keeps and reads. */
typedef struct method_index {
    double budget_bits;   /* index bits a decode step reads per token per KV head, scales included */
    double asked_bits;    /* the budget the rule met (Fathom: its target, whose plans read budget_bits
                           * on average); 0: budget_bits */
    double stored_bits;   /* index bits stored per token per KV head */
    int channels;         /* channels a plane index reads at full depth (SparQ's r), else 0 */
    bool planes;          /* stored as 4-bit planes channel-major: placement planes:t may split it */
    bool planned;         /* fs holds the Fathom planner's statistics at the chosen plane budget */
    fathom_stats_t fs;
} method_index_t;

typedef struct method_ops {
    const char *name;
    /* its scan's family of cost parameters (scan_<family>_*; NULL: the scan kind's own), and the
     * other forms measured of it (NULL-terminated, NULL: none): <family>_<form> */
    const char *scan_family;
    const char *const *scan_forms;
    bool reads_all;        /* keeps no index: a step reads every offloaded K/V row (exact attention) */
    bool query_dependent;  /* which index bits a step reads depends on its query: a per-query plan
                            * (wf_plan) comes first, the index fetch reads plane prefixes, a prefill
                            * chunk reads the whole index plane by plane */
    bool planner;          /* plans its reads with the Fathom planner (models/fathom.h): the keys
                            * plane_bits, keys, seed and queries are its */
    bool pages;            /* selects pages of `page` tokens, fetched whole (layout page) */
    bool budget_fixed;     /* the model fixes its budget: the budget key is 0 or that value */
    method_select_t select;     /* the selection the method's published kernels make (per query head
                                 * for learned per-head signatures, else per KV head); a validation
                                 * probe asks for it. The default for every method is one rule:
                                 * METHOD_SELECT_RULE (models/method.c) */
    method_layout_t layout;     /* host K/V layout by default */
    method_fetch_t index_fetch; /* index fetch path by default (index_fetch: auto) */
    /* The budget rule: fills *ix for cfg on model m, K/V elements of kv_bytes bytes. Errors:
     * ERR_INVAL, ERR_RANGE (the budget or a method key out of what the method reads), ERR_NOMEM. */
    int (*resolve)(const method_cfg_t *cfg, const llm_t *m, double kv_bytes, method_index_t *ix, err_t *e);
    /* Pieces per KV head of a host index read over n_off offloaded tokens, the first t planes in HBM
     * (placement planes:t, else 0), by a decode step or (prefill) a prefill chunk, in the layout
     * cfg->index_layout (resolved); NULL when reads_all. */
    double (*index_pieces)(const method_index_t *ix, const method_cfg_t *cfg, const llm_t *m, double n_off, int t,
                           bool prefill);
    /* Index bits per token per KV head a decode step reads of the planes past the first t (t ≥ 1);
     * NULL where no configuration keeps planes. */
    double (*plane_read_bits)(const method_index_t *ix, int t);
    /* Channels a query's plan reads per KV head (a copy each when the copy engine fetches them);
     * NULL unless query_dependent. */
    double (*plan_channels)(const method_index_t *ix);
} method_ops_t;

/* The table of a resolved method, and what its budget rule resolved. */
const method_ops_t *method_table(const method_t *mt);
const method_index_t *method_index(const method_t *mt);

/* Bits per token per KV head of `channels` channels of 4-bit planes past the first t (the scales with
 * them when t = 0). */
double method_plane_bits(double channels, int t);

/* Runs per KV head of `channels` channels of a contiguous 4-bit plane index past the first t planes:
 * a plane each, and the channel's scales (one run per channel) when t = 0. */
double method_plane_pieces(double channels, int t);

/* The budget rule of a method whose index the model fixes at `fixed` bits (`what`: what besides the
 * model fixes it, "" for nothing): budget 0 or `fixed`. Errors: ERR_INVAL naming both. */
int method_fixed_budget(const method_cfg_t *cfg, const char *name, double fixed, const char *what, method_index_t *ix,
                        err_t *e);

/* ---- the registry ---------------------------------------------------------------------------- */

#define METHOD_MAX 32
#define METHOD_SCAN_FAMILIES_MAX 24

/* Adds ops (borrowed: it must outlive every use) after the built-in methods; it is then known by
 * name to scenarios, plans, quality tables and cost forms. Errors: ERR_INVAL (no name or resolve, a
 * name taken), ERR_RANGE (METHOD_MAX methods, or METHOD_SCAN_FAMILIES_MAX scan families). */
int method_register(const method_ops_t *ops, err_t *e);
/* Methods known, built-in first, and the table of method `kind` (0 ≤ kind < method_count()). */
int method_count(void);
const method_ops_t *method_ops_at(int kind);
/* Method kind by name, or -1. */
int method_find(const char *name);
/* The methods' names, NULL-terminated, in kind order (the choices of the method key). */
const char *const *method_names(void);

/* Scan families of the methods' tables: each method's family, the built-in ones first, then their
 * forms as <family>_<form>, then those of methods registered since, in order (indices never move). */
int method_scan_family_count(void);
const char *method_scan_family_name(int family);

#endif
