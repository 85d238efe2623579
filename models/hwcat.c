#include "models/hwcat.h"
#include "common/str.h"
#include "models/cost_params.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POS(k, u, d) {k, HWP_NUM, u, true, 0, true, d, -1, 0}
#define NONNEG(k, u, d) {k, HWP_NUM, u, true, 0, false, d, -1, 0}

static const hw_param_def_t gpu_defs[] = {
    {"memory", HWP_TEXT, "", true, 0, false, "device memory kind (HBM3e, GDDR6, ...)", -1, 0},
    {"hbm_bytes", HWP_BYTES, "B", true, 0, true, "device memory capacity", -1, 0},
    POS("hbm_GBps", "GB/s", "device memory bandwidth (datasheet peak)"),
    {"sm_count", HWP_INT, "SMs", true, 1, false, "streaming multiprocessors", -1, 0},
    {"l2_bytes", HWP_BYTES, "B", true, 0, true, "last-level (L2) cache capacity", -1, 0},
    POS("bf16_TFLOPS", "TFLOP/s", "dense BF16 tensor peak"),
    NONNEG("fp8_TFLOPS", "TFLOP/s", "dense FP8 tensor peak (0: unsupported)"),
    {"fp32_TFLOPS", HWP_NUM, "TFLOP/s", false, 0, true, "FP32 peak of the CUDA cores (FMA = 2 FLOPs; no tensor cores)", -1, 0},
    {"link", HWP_TEXT, "", true, 0, false, "the GPU's own host link (links.yaml)", -1, 0},
};


/* A link's measured peaks are optional: without them models/platform.c derives them from raw_GBps. */
#define LINKRATE(k, d) {k, HWP_NUM, "GB/s", false, 0, true, d, -1, 0}
static const hw_param_def_t link_defs[] = {
    POS("raw_GBps", "GB/s", "raw signalling rate per direction after line coding (datasheet)"),
    LINKRATE("h2d_GBps", "copy-engine host-to-device peak (where measured; a box may set it for its host)"),
    LINKRATE("d2h_GBps", "copy-engine device-to-host peak (where measured; a box may set it for its host)"),
    LINKRATE("duplex_GBps", "both directions at once, total (where measured; a box may set it for its host)"),
};

static const hw_param_def_t tier_defs[] = {
    POS("cxl_read_GBps", "GB/s", "tier read bandwidth (device to CPU)"),
    POS("cxl_write_GBps", "GB/s", "tier write bandwidth"),
    {"cxl_bytes", HWP_BYTES, "B", true, 0, true, "tier capacity", -1, 0},
};

static const hw_param_def_t box_defs[] = {
    {"gpu", HWP_TEXT, "", true, 0, false, "GPU preset (gpus.yaml)", -1, 0},
    {"gpus", HWP_INT, "GPUs", true, 1, false, "GPUs in the box", -1, 0},
    {"gpus_per_switch", HWP_INT, "GPUs", true, 1, false, "GPUs behind one PCIe switch uplink (1: none)", -1, 0},
    {"numa_nodes", HWP_INT, "nodes", true, 1, false, "host NUMA nodes", -1, 0},
    {"host_dram_bytes", HWP_BYTES, "B", true, 0, true, "host DRAM capacity", -1, 0},
    POS("host_dram_GBps", "GB/s", "host DRAM bandwidth shared by all GPUs"),
    {"hbm_reserve_bytes", HWP_BYTES, "B", true, 0, false, "device memory kept back per GPU", -1, 0},
    {"link", HWP_TEXT, "", false, 0, false, "replaces the GPU's link (links.yaml); the box may also set h2d_GBps, d2h_GBps, duplex_GBps: its host's figures for its own link", -1, 0},
    {"tier", HWP_TEXT, "", false, 0, false, "memory tier behind the CPU (tiers.yaml)", -1, 0},
};

#define NDEF(a) (sizeof a / sizeof a[0])

typedef struct kind_schema {
    const char *file;
    const hw_param_def_t *defs;
    size_t n;
} kind_schema_t;

static const kind_schema_t schemas[HW_KIND_COUNT] = {
    [HW_GPU] = {"gpus.yaml", gpu_defs, NDEF(gpu_defs)},
    [HW_LINK] = {"links.yaml", link_defs, NDEF(link_defs)},
    [HW_TIER] = {"tiers.yaml", tier_defs, NDEF(tier_defs)},
    [HW_BOX] = {"boxes.yaml", box_defs, NDEF(box_defs)},
};

typedef struct entry {
    char *name;
    char *base;        /* NULL when none; cleared once resolved */
    char *where;       /* file:line of the entry */
    hw_pset_t ps;
} entry_t;

struct hwcat {
    entry_t *e[HW_KIND_COUNT];
    size_t n[HW_KIND_COUNT];
};

/* ---- small helpers -------------------------------------------------------------------------- */

static void param_clear(hw_param_t *p)
{
    free(p->text);
    free(p->origin);
    p->text = p->origin = NULL;
}

static void pset_free(hw_pset_t *ps)
{
    for (size_t i = 0; i < ps->n; i++) param_clear(&ps->p[i]);
    free(ps->p);
    ps->p = NULL;
    ps->n = 0;
}

const hw_param_t *hw_pset_find(const hw_pset_t *ps, const char *key)
{
    for (size_t i = 0; ps && i < ps->n; i++)
        if (!strcmp(ps->p[i].key, key)) return &ps->p[i];
    return NULL;
}

/* Copies src into a new parameter slot of ps, replacing one with the same key; takes ownership of
 * nothing (strings are duplicated). */
static int pset_put(hw_pset_t *ps, const hw_param_t *src, err_t *e)
{
    hw_param_t copy = *src;
    copy.text = str_dup(src->text);
    copy.origin = str_dup(src->origin);
    if ((src->text && !copy.text) || (src->origin && !copy.origin)) {
        param_clear(&copy);
        return err_set(e, ERR_NOMEM, "hwcat: out of memory");
    }
    for (size_t i = 0; i < ps->n; i++)
        if (!strcmp(ps->p[i].key, src->key)) {
            param_clear(&ps->p[i]);
            ps->p[i] = copy;
            return ERR_OK;
        }
    hw_param_t *np = realloc(ps->p, (ps->n + 1) * sizeof *np);
    if (!np) {
        param_clear(&copy);
        return err_set(e, ERR_NOMEM, "hwcat: out of memory");
    }
    ps->p = np;
    ps->p[ps->n++] = copy;
    return ERR_OK;
}

/* Removes the parameter called key, if any. */
static void pset_drop(hw_pset_t *ps, const char *key)
{
    for (size_t i = 0; i < ps->n; i++)
        if (!strcmp(ps->p[i].key, key)) {
            param_clear(&ps->p[i]);
            ps->p[i] = ps->p[--ps->n];
            return;
        }
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 64;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

static const hw_param_def_t *def_find(const hw_param_def_t *defs, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(defs[i].key, key)) return &defs[i];
    return NULL;
}

/* Finds key in every schema (overrides may name any parameter). */
static const hw_param_def_t *def_find_any(const char *key)
{
    const hw_param_def_t *d = def_find(cost_param_defs, cost_param_count, key);
    for (int k = 0; !d && k < HW_KIND_COUNT; k++) d = def_find(schemas[k].defs, schemas[k].n, key);
    return d;
}

static const char *nearest(const hw_param_def_t *defs, size_t n, const hw_param_def_t *defs2, size_t n2,
                           const char *key)
{
    const char *best = NULL;
    size_t bd = 4;
    for (size_t i = 0; i < n + n2; i++) {
        const char *k = i < n ? defs[i].key : defs2[i - n].key;
        size_t d = edit_distance(k, key);
        if (d < bd) { bd = d; best = k; }
    }
    return best;
}

static int unknown_key(err_t *e, const cfg_node_t *at, const char *key, const char *near)
{
    if (near) return cfg_error(e, ERR_INVAL, at, "unknown key '%s' (did you mean '%s'?)", key, near);
    return cfg_error(e, ERR_INVAL, at, "unknown key '%s'", key);
}

/* ---- one parameter from YAML ---------------------------------------------------------------- */

typedef struct pnode {
    const cfg_node_t *value;
    const char *origin;
    double lo, hi, sd;
} pnode_t;

static const cfg_param_t pnode_params[] = {
    {"value", CFG_T_NODE, offsetof(pnode_t, value), NULL, 1, 0, NULL, "the value"},
    {"origin", CFG_T_STRING, offsetof(pnode_t, origin), "", 1, 0, NULL,
     "where the value comes from: measured CSV, fitted profile, datasheet, or assumed"},
    {"lo", CFG_T_DOUBLE, offsetof(pnode_t, lo), "0", 1, 0, NULL, "predictor range, low end"},
    {"hi", CFG_T_DOUBLE, offsetof(pnode_t, hi), "-1", 1, 0, NULL, "predictor range, high end"},
    {"stderr", CFG_T_DOUBLE, offsetof(pnode_t, sd), "0", 0, 1e300, NULL, "standard error"},
};

/* Reads parameter d from node v: a {value, origin, ...} map, or (when origin is optional) a bare
 * scalar. `dflt_origin` is used when the text gives none and origins are optional. */
static int param_read(const hw_param_def_t *d, const cfg_node_t *v, bool need_origin, const char *dflt_origin,
                      hw_param_t *out, err_t *e)
{
    pnode_t pn = {0};
    const cfg_node_t *val = v;
    memset(out, 0, sizeof *out);
    out->key = d->key;
    out->unit = d->unit;
    out->lo = 0;
    out->hi = -1;
    if (cfg_kind(v) == CFG_MAP) {
        int rc = cfg_bind(v, pnode_params, NDEF(pnode_params), &pn, e);
        if (rc) return rc;
        if (!pn.value) return cfg_error(e, ERR_INVAL, v, "missing required key 'value'");
        val = pn.value;
        out->lo = pn.lo;
        out->hi = pn.hi;
        out->stderr_v = pn.sd;
    } else if (need_origin) {
        return cfg_error(e, ERR_INVAL, v, "write {value: ..., origin: \"...\"}: every hardware parameter needs an origin");
    }
    if (need_origin && (!pn.origin || !*pn.origin))
        return cfg_error(e, ERR_INVAL, v, "missing required key 'origin'");
    if (cfg_kind(val) != CFG_SCALAR) return cfg_error(e, ERR_INVAL, val, "expected a scalar value");
    int rc = ERR_OK;
    double x = 0;
    switch (d->type) {
    case HWP_TEXT:
        out->value = NAN;
        out->text = str_dup(cfg_str(val));
        if (!out->text) return err_set(e, ERR_NOMEM, "hwcat: out of memory");
        break;
    case HWP_NUM: rc = cfg_double(val, &x, e); break;
    case HWP_BYTES: rc = cfg_bytes(val, &x, e); break;
    case HWP_INT: {
        int64_t i = 0;
        rc = cfg_int64(val, &i, e);
        x = (double)i;
        break;
    }
    }
    if (rc) {
        param_clear(out);
        return rc;
    }
    if (d->type != HWP_TEXT) {
        if (x < d->min || (d->min_excl && x == d->min)) {
            param_clear(out);
            return cfg_error(e, ERR_RANGE, val, "%s must be %s %g, got %g", d->key, d->min_excl ? ">" : ">=",
                             d->min, x);
        }
        out->value = x;
    }
    char where[512];
    if (pn.origin && *pn.origin) {
        out->origin = str_dup(pn.origin);
    } else {
        snprintf(where, sizeof where, "%s at %s:%d", dflt_origin, cfg_file(v), cfg_line(v));
        out->origin = str_dup(where);
    }
    if (!out->origin) {
        param_clear(out);
        return err_set(e, ERR_NOMEM, "hwcat: out of memory");
    }
    return ERR_OK;
}

/* ---- catalogs ------------------------------------------------------------------------------- */

int hwcat_new(hwcat_t **out, err_t *e)
{
    *out = calloc(1, sizeof **out);
    return *out ? ERR_OK : err_set(e, ERR_NOMEM, "hwcat: out of memory");
}

void hwcat_free(hwcat_t *cat)
{
    if (!cat) return;
    for (int k = 0; k < HW_KIND_COUNT; k++) {
        for (size_t i = 0; i < cat->n[k]; i++) {
            free(cat->e[k][i].name);
            free(cat->e[k][i].base);
            free(cat->e[k][i].where);
            pset_free(&cat->e[k][i].ps);
        }
        free(cat->e[k]);
    }
    free(cat);
}

static entry_t *entry_find(const hwcat_t *cat, hw_kind_t kind, const char *name)
{
    for (size_t i = 0; i < cat->n[kind]; i++)
        if (!strcmp(cat->e[kind][i].name, name)) return &cat->e[kind][i];
    return NULL;
}

static int read_entry_map(const cfg_node_t *map, const hw_param_def_t *defs, size_t n, bool costs_allowed,
                          entry_t *en, err_t *e)
{
    for (size_t j = 0; j < cfg_size(map); j++) {
        const char *key = cfg_key_at(map, j);
        const cfg_node_t *v = cfg_at(map, j);
        if (costs_allowed && !strcmp(key, "base")) {
            if (cfg_kind(v) != CFG_SCALAR) return cfg_error(e, ERR_INVAL, v, "base: expected a preset name");
            en->base = str_dup(cfg_str(v));
            if (!en->base) return err_set(e, ERR_NOMEM, "hwcat: out of memory");
            continue;
        }
        if (costs_allowed && !strcmp(key, "costs") && defs == gpu_defs) {
            if (cfg_kind(v) != CFG_MAP) return cfg_error(e, ERR_INVAL, v, "costs: expected a map");
            int rc = read_entry_map(v, cost_param_defs, cost_param_count, false, en, e);
            if (rc) return rc;
            continue;
        }
        const hw_param_def_t *d = def_find(defs, n, key);
        /* a box may carry its host's measured or published link peaks (not the raw rate: the link's) */
        if (!d && defs == box_defs && strcmp(key, "raw_GBps")) d = def_find(link_defs, NDEF(link_defs), key);
        if (!d) return unknown_key(e, v, key, nearest(defs, n, NULL, 0, key));
        hw_param_t p;
        int rc = param_read(d, v, true, "", &p, e);
        if (!rc) rc = pset_put(&en->ps, &p, e);
        param_clear(&p);
        if (rc) return rc;
    }
    return ERR_OK;
}

/* Resolves entry i's base chain (depth-limited against cycles). */
static int resolve_base(hwcat_t *cat, hw_kind_t kind, entry_t *en, int depth, err_t *e)
{
    if (!en->base) return ERR_OK;
    if (depth > 16) return err_set(e, ERR_INVAL, "%s: base chain of '%s' loops", en->where, en->name);
    entry_t *b = entry_find(cat, kind, en->base);
    if (!b || b == en)
        return err_set(e, ERR_NOTFOUND, "%s: key '%s.base': no %s preset '%s'", en->where, en->name,
                       schemas[kind].file, en->base);
    int rc = resolve_base(cat, kind, b, depth + 1, e);
    for (size_t i = 0; !rc && i < b->ps.n; i++) {
        if (hw_pset_find(&en->ps, b->ps.p[i].key)) continue;
        hw_param_t p = b->ps.p[i];
        char buf[1024];
        if (!strncmp(p.origin, "assumed: copied from ", 21)) snprintf(buf, sizeof buf, "%s", p.origin);
        else snprintf(buf, sizeof buf, "assumed: copied from %s (%s)", b->name, p.origin);
        p.origin = buf;
        rc = pset_put(&en->ps, &p, e);
    }
    free(en->base);
    en->base = NULL;
    return rc;
}

static int check_required(const entry_t *en, const hw_param_def_t *defs, size_t n, const cfg_node_t *at, err_t *e)
{
    for (size_t i = 0; i < n; i++)
        if (defs[i].required && !hw_pset_find(&en->ps, defs[i].key))
            return cfg_error(e, ERR_INVAL, at, "missing required key '%s' (%s)", defs[i].key, defs[i].doc);
    return ERR_OK;
}

static int load_doc(hwcat_t *cat, hw_kind_t kind, cfg_doc_t *doc, err_t *e)
{
    const cfg_node_t *root = cfg_root(doc);
    if (cfg_kind(root) != CFG_MAP) return cfg_error(e, ERR_INVAL, root, "expected a map of presets");
    size_t first = cat->n[kind], n = cfg_size(root);
    entry_t *ne = realloc(cat->e[kind], (first + n) * sizeof *ne);
    if (!ne) return err_set(e, ERR_NOMEM, "hwcat: out of memory");
    cat->e[kind] = ne;
    int rc = ERR_OK;
    for (size_t j = 0; !rc && j < n; j++) {
        const char *name = cfg_key_at(root, j);
        const cfg_node_t *m = cfg_at(root, j);
        if (entry_find(cat, kind, name)) {
            rc = cfg_error(e, ERR_INVAL, m, "preset '%s' is defined twice", name);
            break;
        }
        if (cfg_kind(m) != CFG_MAP) {
            rc = cfg_error(e, ERR_INVAL, m, "expected a map of parameters");
            break;
        }
        entry_t *en = &cat->e[kind][cat->n[kind]++];
        memset(en, 0, sizeof *en);
        char where[512];
        snprintf(where, sizeof where, "%s:%d:%d", cfg_file(m), cfg_line(m), cfg_col(m));
        en->name = str_dup(name);
        en->where = str_dup(where);
        if (!en->name || !en->where) rc = err_set(e, ERR_NOMEM, "hwcat: out of memory");
        if (!rc) rc = read_entry_map(m, schemas[kind].defs, schemas[kind].n, true, en, e);
    }
    for (size_t i = first; !rc && i < cat->n[kind]; i++)
        rc = resolve_base(cat, kind, &cat->e[kind][i], 0, e);
    for (size_t i = first; !rc && i < cat->n[kind]; i++) {
        const cfg_node_t *m = cfg_get(root, cat->e[kind][i].name);
        /* cost-model parameters are optional here: a fitted profile supplies them (calib.h) */
        rc = check_required(&cat->e[kind][i], schemas[kind].defs, schemas[kind].n, m, e);
    }
    return rc;
}

int hwcat_load_file(hwcat_t *cat, hw_kind_t kind, const char *path, err_t *e)
{
    cfg_doc_t *doc = NULL;
    int rc = cfg_parse_file(path, &doc, e);
    if (!rc) rc = load_doc(cat, kind, doc, e);
    cfg_free(doc);
    return rc;
}

int hwcat_load_string(hwcat_t *cat, hw_kind_t kind, const char *name, const char *text, err_t *e)
{
    cfg_doc_t *doc = NULL;
    int rc = cfg_parse_string(name, text, strlen(text), &doc, e);
    if (!rc) rc = load_doc(cat, kind, doc, e);
    cfg_free(doc);
    return rc;
}

int hwcat_load(const char *dir, hwcat_t **out, err_t *e)
{
    int rc = hwcat_new(out, e);
    for (int k = 0; !rc && k < HW_KIND_COUNT; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, schemas[k].file);
        rc = hwcat_load_file(*out, (hw_kind_t)k, path, e);
    }
    if (rc) {
        hwcat_free(*out);
        *out = NULL;
    }
    return rc;
}

size_t hwcat_count(const hwcat_t *cat, hw_kind_t kind) { return cat->n[kind]; }

const char *hwcat_name(const hwcat_t *cat, hw_kind_t kind, size_t i)
{
    return i < cat->n[kind] ? cat->e[kind][i].name : NULL;
}

const hw_pset_t *hwcat_entry(const hwcat_t *cat, hw_kind_t kind, const char *name)
{
    const entry_t *en = entry_find(cat, kind, name);
    return en ? &en->ps : NULL;
}

/* ---- resolution ----------------------------------------------------------------------------- */

static int not_found(const hwcat_t *cat, hw_kind_t kind, const char *name, err_t *e)
{
    char list[1024] = "";
    for (size_t i = 0; i < cat->n[kind]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", cat->e[kind][i].name);
    return err_set(e, ERR_NOTFOUND, "no %s preset '%s' (known: %s)", schemas[kind].file, name, list);
}

static int merge_entry(const hwcat_t *cat, hw_kind_t kind, const char *name, hw_pset_t *ps, err_t *e)
{
    const hw_pset_t *src = hwcat_entry(cat, kind, name);
    if (!src) return not_found(cat, kind, name, e);
    for (size_t i = 0; i < src->n; i++) {
        int rc = pset_put(ps, &src->p[i], e);
        if (rc) return rc;
    }
    return ERR_OK;
}

static double num(const hw_pset_t *ps, const char *key)
{
    const hw_param_t *p = hw_pset_find(ps, key);
    return p ? p->value : 0.0;
}

static const char *text(const hw_pset_t *ps, const char *key)
{
    const hw_param_t *p = hw_pset_find(ps, key);
    return p ? p->text : NULL;
}

static int apply_overrides(hw_pset_t *ps, const cfg_node_t *ov, err_t *e)
{
    if (!ov) return ERR_OK;
    if (cfg_kind(ov) != CFG_MAP) return cfg_error(e, ERR_INVAL, ov, "expected a map of parameter overrides");
    for (size_t j = 0; j < cfg_size(ov); j++) {
        const char *key = cfg_key_at(ov, j);
        const cfg_node_t *v = cfg_at(ov, j);
        const hw_param_def_t *d = def_find_any(key);
        if (!d) {
            const char *best = nearest(cost_param_defs, cost_param_count, gpu_defs, NDEF(gpu_defs), key);
            for (int k = HW_LINK; !best && k < HW_KIND_COUNT; k++)
                best = nearest(schemas[k].defs, schemas[k].n, NULL, 0, key);
            return unknown_key(e, v, key, best);
        }
        hw_param_t p;
        int rc = param_read(d, v, false, "override", &p, e);
        if (!rc) rc = pset_put(ps, &p, e);
        param_clear(&p);
        if (rc) return rc;
    }
    return ERR_OK;
}

static int set_name(char **dst, const char *src, err_t *e)
{
    free(*dst);
    *dst = str_dup(src);
    return (src && !*dst) ? err_set(e, ERR_NOMEM, "hwcat: out of memory") : ERR_OK;
}

int hw_resolve(const hwcat_t *cat, const hw_select_t *sel, const cfg_node_t *overrides, hw_t *out,
               err_t *e)
{
    memset(out, 0, sizeof *out);
    if (!sel->box) return err_set(e, ERR_INVAL, "hardware: no box given");
    hw_pset_t *ps = &out->params;
    int rc = merge_entry(cat, HW_BOX, sel->box, ps, e);
    /* Name choices may come from the overrides too (`gpu: b200`), so apply them once here to read
     * the names, then again after the presets so their values win. */
    if (!rc) rc = apply_overrides(ps, overrides, e);
    const char *gpu = sel->gpu ? sel->gpu : text(ps, "gpu");
    if (!rc) rc = set_name(&out->box, sel->box, e);
    if (!rc) rc = set_name(&out->gpu, gpu, e);
    if (!rc) rc = merge_entry(cat, HW_GPU, out->gpu, ps, e);
    if (!rc) rc = apply_overrides(ps, overrides, e);
    /* The GPU preset's own `link` overwrote the box's: the box's choice wins over the GPU's. */
    const hw_pset_t *boxps = rc ? NULL : hwcat_entry(cat, HW_BOX, sel->box);
    const char *link = sel->link ? sel->link : text(boxps, "link") ? text(boxps, "link") : text(ps, "link");
    if (overrides && cfg_get(overrides, "link") && !sel->link) link = text(ps, "link");
    if (!rc) rc = set_name(&out->link, link, e);
    if (!rc) rc = merge_entry(cat, HW_LINK, out->link, ps, e);
    /* The box's own figures for its link (measured or published on that host) win over the link
     * preset's, unless the link was named: a named link follows the link rule (models/platform.h). */
    bool named = sel->link || (overrides && cfg_get(overrides, "link"));
    const hw_pset_t *linkps = rc ? NULL : hwcat_entry(cat, HW_LINK, out->link);
    for (size_t i = 0; !rc && i < NDEF(link_defs); i++) {
        const hw_param_t *bp = hw_pset_find(boxps, link_defs[i].key);
        if (bp && !named) rc = pset_put(ps, bp, e);
        else if (bp && !hw_pset_find(linkps, link_defs[i].key)) pset_drop(ps, link_defs[i].key);
        out->link_from_box |= bp && !named;
    }
    const char *tier = sel->tier ? sel->tier : text(ps, "tier");
    if (!rc && tier && strcmp(tier, "none")) {
        rc = set_name(&out->tier, tier, e);
        if (!rc) rc = merge_entry(cat, HW_TIER, tier, ps, e);
    }
    if (!rc) rc = apply_overrides(ps, overrides, e);
    if (!rc) rc = set_name(&out->memory, text(ps, "memory"), e);
    if (rc) {
        hw_free(out);
        return rc;
    }
    out->gpus = sel->gpus > 0 ? sel->gpus : (int)num(ps, "gpus");
    out->gpus_per_switch = (int)num(ps, "gpus_per_switch");
    out->numa_nodes = (int)num(ps, "numa_nodes");
    out->sm_count = (int)num(ps, "sm_count");
    out->host_dram_bytes = num(ps, "host_dram_bytes");
    out->host_dram_Bps = num(ps, "host_dram_GBps") * 1e9;
    out->hbm_reserve_bytes = num(ps, "hbm_reserve_bytes");
    out->hbm_bytes = num(ps, "hbm_bytes");
    out->hbm_Bps = num(ps, "hbm_GBps") * 1e9;
    out->bf16_flops = num(ps, "bf16_TFLOPS") * 1e12;
    out->fp8_flops = num(ps, "fp8_TFLOPS") * 1e12;
    out->h2d_Bps = num(ps, "h2d_GBps") * 1e9;
    out->d2h_Bps = num(ps, "d2h_GBps") * 1e9;
    out->duplex_Bps = num(ps, "duplex_GBps") * 1e9; /* 0 without measured peaks: models/platform.c derives them */
    out->cxl_read_Bps = out->tier ? num(ps, "cxl_read_GBps") * 1e9 : 0;
    out->cxl_write_Bps = out->tier ? num(ps, "cxl_write_GBps") * 1e9 : 0;
    out->cxl_bytes = out->tier ? num(ps, "cxl_bytes") : 0;
    if (out->gpus_per_switch > out->gpus) out->gpus_per_switch = out->gpus;
    return ERR_OK;
}

typedef struct hwsel_node {
    const char *box, *gpu, *link, *tier;
    int64_t gpus;
    const cfg_node_t *set;
} hwsel_node_t;

static const cfg_param_t hwsel_params[] = {
    {"box", CFG_T_STRING, offsetof(hwsel_node_t, box), NULL, 1, 0, NULL, "box preset (boxes.yaml)"},
    {"gpu", CFG_T_STRING, offsetof(hwsel_node_t, gpu), "", 1, 0, NULL, "GPU preset replacing the box's"},
    {"link", CFG_T_STRING, offsetof(hwsel_node_t, link), "", 1, 0, NULL, "link preset replacing the GPU's"},
    {"tier", CFG_T_STRING, offsetof(hwsel_node_t, tier), "", 1, 0, NULL, "memory tier preset, or none"},
    {"gpus", CFG_T_INT, offsetof(hwsel_node_t, gpus), "0", 0, 4096, NULL, "GPUs used (0: the box's)"},
    {"set", CFG_T_NODE, offsetof(hwsel_node_t, set), NULL, 1, 0, NULL, "parameter overrides"},
};

int hw_resolve_node(const hwcat_t *cat, const cfg_node_t *node, hw_t *out, err_t *e)
{
    hwsel_node_t h;
    memset(out, 0, sizeof *out);
    int rc = cfg_bind(node, hwsel_params, NDEF(hwsel_params), &h, e);
    if (rc) return rc;
    hw_select_t sel = {h.box, *h.gpu ? h.gpu : NULL, *h.link ? h.link : NULL, *h.tier ? h.tier : NULL,
                       (int)h.gpus};
    return hw_resolve(cat, &sel, h.set, out, e);
}

void hw_free(hw_t *hw)
{
    if (!hw) return;
    free(hw->box);
    free(hw->gpu);
    free(hw->link);
    free(hw->tier);
    free(hw->memory);
    pset_free(&hw->params);
    memset(hw, 0, sizeof *hw);
}

const hw_param_t *hw_param(const hw_t *hw, const char *key) { return hw_pset_find(&hw->params, key); }

const char *hwcat_param_unit(const char *key)
{
    const hw_param_def_t *d = def_find_any(key);
    return d ? d->unit : NULL;
}

bool hwcat_param_is_text(const char *key)
{
    const hw_param_def_t *d = def_find_any(key);
    return d && d->type == HWP_TEXT;
}

static void describe(FILE *fp, const char *title, const hw_param_def_t *d, size_t n, bool checked)
{
    fprintf(fp, "%s:\n", title);
    for (size_t i = 0; i < n; i++)
        fprintf(fp, "  %-24s %-8s %-9s %s %g  %s\n", d[i].key, d[i].unit, checked && d[i].required ? "required" : "optional",
                d[i].min_excl ? ">" : ">=", d[i].min, d[i].doc);
}

void hwcat_describe_each(void (*fn)(void *arg, const char *file, const hw_param_def_t *def, bool checked), void *arg)
{
    for (int k = 0; k < HW_KIND_COUNT; k++)
        for (size_t i = 0; i < schemas[k].n; i++) fn(arg, schemas[k].file, &schemas[k].defs[i], true);
    for (size_t i = 0; i < cost_param_count; i++) fn(arg, "gpus.yaml costs", &cost_param_defs[i], false);
}

void hwcat_describe(FILE *fp)
{
    for (int k = 0; k < HW_KIND_COUNT; k++) describe(fp, schemas[k].file, schemas[k].defs, schemas[k].n, true);
    describe(fp, "gpus.yaml costs (a fitted profile supplies what a preset lacks)", cost_param_defs, cost_param_count, false);
}
