/* uplan — a user's plan file read and evaluated as a replay session (models/uplan.h). */
#include "models/uplan.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfg.h"
#include "models/hwinst.h"
#include "models/opkind.h"

/* The replay kinds by their index in rf_kind_t, as a choice list. */
static const char *const path_names[] = {"h2d", "d2h", "h2d2d", "h2dbatch", "gather", "hbm",
                                         "compute", "spin", "sync", "host", "gemm", NULL};
static const char *const scale_names[] = {"fixed", "context", NULL};
static const char *const list_names[UPLAN_LISTS] = {"step", "layer", "end"};

/* The op kind a path's ops are named by unless `kind` says otherwise. */
static const int path_kind[RF_OP_COUNT] = {
    [RF_OP_H2D] = OPKIND_H2D_COPY, [RF_OP_D2H] = OPKIND_D2H_COPY, [RF_OP_H2D2D] = OPKIND_H2D_COPY2D,
    [RF_OP_H2DBATCH] = OPKIND_H2D_BATCH, [RF_OP_GATHER] = OPKIND_SM_GATHER, [RF_OP_HBM] = OPKIND_HBM_STREAM,
    [RF_OP_COMPUTE] = OPKIND_COMPUTE, [RF_OP_SPIN] = OPKIND_SPIN, [RF_OP_SYNC] = OPKIND_LAUNCH,
    [RF_OP_HOST] = OPKIND_HOST_BUSY, [RF_OP_GEMM] = OPKIND_GEMM};

/* ---- one op ----------------------------------------------------------------------------------- */

typedef struct op_fields {
    const char *id, *kind;
    int path, scale;
    int64_t stream;
    const cfg_node_t *after;
    int64_t pieces, piece_bytes, span, bytes, flops, us, m, n, k;
} op_fields_t;

#define F_(key, type, field, dflt, lo, hi, ch, doc) {key, type, offsetof(op_fields_t, field), dflt, lo, hi, ch, doc}
static const cfg_param_t op_params[] = {
    F_("id", CFG_T_STRING, id, "", 1, 0, NULL, "the op's name, unique in its list, for `after`"),
    F_("kind", CFG_T_STRING, kind, "", 1, 0, NULL, "op kind reports name it by (models/opkind.h); default by path"),
    F_("path", CFG_T_ENUM, path, NULL, 1, 0, path_names, "what runs: a replay op kind (docs/replay.md)"),
    F_("stream", CFG_T_INT, stream, "0", 0, RF_MAX_STREAMS - 1, NULL, "the session's stream (not for sync and host)"),
    F_("after", CFG_T_NODE, after, NULL, 1, 0, NULL, "ids of earlier ops it waits for; prev.ID (prevK.ID), step.ID"),
    F_("scale", CFG_T_ENUM, scale, "fixed", 1, 0, scale_names, "context: sizes grow with the context"),
    F_("pieces", CFG_T_INT, pieces, "0", 0, 1 << 20, NULL, "transfers: pieces"),
    F_("piece_bytes", CFG_T_INT, piece_bytes, "0", 0, 256 << 20, NULL, "transfers: bytes per piece, a power of two"),
    F_("span", CFG_T_INT, span, "0", 0, (double)RF_MAX_REGION_BYTES, NULL, "transfers: host bytes the pieces lie in"),
    F_("bytes", CFG_T_INT, bytes, "0", 0, (double)(64ull << 30), NULL, "hbm: bytes read"),
    F_("flops", CFG_T_INT, flops, "0", 0, 1e15, NULL, "compute: FLOPs"),
    F_("us", CFG_T_INT, us, "0", 0, 1e7, NULL, "spin, host: microseconds"),
    F_("m", CFG_T_INT, m, "0", 0, RF_MAX_GEMM_DIM, NULL, "gemm: rows"),
    F_("n", CFG_T_INT, n, "0", 0, RF_MAX_GEMM_DIM, NULL, "gemm: columns"),
    F_("k", CFG_T_INT, k, "0", 0, RF_MAX_GEMM_DIM, NULL, "gemm: inner dimension"),
};
#undef F_
#define N_OP_PARAMS (sizeof op_params / sizeof op_params[0])

static void where_of(const cfg_node_t *n, char *out)
{
    snprintf(out, UPLAN_WHERE_MAX, "%s:%d:%d", cfg_file(n), cfg_line(n), cfg_col(n));
}

/* The size keys a path takes (besides stream, after, scale, id, kind, path). */
static bool size_key_allowed(int path, const char *key)
{
    if (rf_kind_is_transfer(path)) return !strcmp(key, "pieces") || !strcmp(key, "piece_bytes") || !strcmp(key, "span");
    if (path == RF_OP_HBM) return !strcmp(key, "bytes");
    if (path == RF_OP_COMPUTE) return !strcmp(key, "flops");
    if (path == RF_OP_SPIN || path == RF_OP_HOST) return !strcmp(key, "us");
    if (path == RF_OP_GEMM) return !strcmp(key, "m") || !strcmp(key, "n") || !strcmp(key, "k");
    return false;
}

static bool is_size_key(const char *key)
{
    static const char *const k[] = {"pieces", "piece_bytes", "span", "bytes", "flops", "us", "m", "n", "k"};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        if (!strcmp(key, k[i])) return true;
    return false;
}

/* Reads op map n into *o (its after node in *after for later). edit: an edit's op (no id or after). */
static int read_op(const cfg_node_t *n, bool edit, uplan_op_t *o, const cfg_node_t **after, err_t *e)
{
    memset(o, 0, sizeof *o);
    *after = NULL;
    if (cfg_kind(n) != CFG_MAP) return cfg_error(e, ERR_INVAL, n, "expected an op: a map with a path");
    op_fields_t f;
    int rc = cfg_bind(n, op_params, N_OP_PARAMS, &f, e);
    if (rc) return rc;
    where_of(n, o->where);
    const cfg_node_t *v;
    if (edit && ((v = cfg_get(n, "id")) || (v = cfg_get(n, "after"))))
        return cfg_error(e, ERR_INVAL, v, "an edit's op takes its place and dependencies from the op it matches");
    if (strlen(f.id) > UPLAN_ID_MAX) return cfg_error(e, ERR_INVAL, cfg_get(n, "id"), "an id is at most %d characters", UPLAN_ID_MAX);
    if (strchr(f.id, '.')) return cfg_error(e, ERR_INVAL, cfg_get(n, "id"), "an id has no '.' (prev.ID and step.ID name other lists)");
    snprintf(o->id, sizeof o->id, "%s", f.id);
    o->kind = path_kind[f.path];
    if (*f.kind) {
        o->kind = opkind_find(f.kind);
        if (o->kind < 0) return cfg_error(e, ERR_INVAL, cfg_get(n, "kind"), "unknown op kind '%s' (`odsim plan --json` names them)", f.kind);
        o->kind_given = true;
    }
    rf_op_t *r = &o->op;
    r->kind = (rf_kind_t)f.path;
    r->stream = (uint32_t)f.stream;
    o->stream_given = cfg_get(n, "stream") != NULL;
    bool host_side = f.path == RF_OP_SYNC || f.path == RF_OP_HOST;
    if (host_side && (v = cfg_get(n, "stream")))
        return cfg_error(e, ERR_INVAL, v, "a %s op runs on the host: it has no stream", path_names[f.path]);
    if (host_side && f.after)
        return cfg_error(e, ERR_INVAL, f.after, "a %s op waits for no op on the GPU (a sync waits for them all)", path_names[f.path]);
    o->scale_context = f.scale == 1;
    /* each size key the path takes is required and at least its minimum; others are refused */
    for (size_t i = 0; i < cfg_size(n); i++) {
        const char *key = cfg_key_at(n, i);
        if (is_size_key(key) && !size_key_allowed(f.path, key))
            return cfg_error(e, ERR_INVAL, cfg_at(n, i), "path %s takes no '%s'", path_names[f.path], key);
    }
    static const struct {
        const char *key;
        size_t off;
        int64_t min;
    } sizes[] = {{"pieces", offsetof(op_fields_t, pieces), 1}, {"piece_bytes", offsetof(op_fields_t, piece_bytes), 16},
                 {"span", offsetof(op_fields_t, span), 1},      {"bytes", offsetof(op_fields_t, bytes), 1},
                 {"flops", offsetof(op_fields_t, flops), 1},    {"us", offsetof(op_fields_t, us), 0},
                 {"m", offsetof(op_fields_t, m), 1},            {"n", offsetof(op_fields_t, n), 1},
                 {"k", offsetof(op_fields_t, k), 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        if (!size_key_allowed(f.path, sizes[i].key)) continue;
        v = cfg_get(n, sizes[i].key);
        int64_t x = *(const int64_t *)((const char *)&f + sizes[i].off);
        if (!v) return cfg_error(e, ERR_INVAL, n, "path %s needs '%s'", path_names[f.path], sizes[i].key);
        if (x < sizes[i].min) return cfg_error(e, ERR_RANGE, v, "%s %lld is below %lld", sizes[i].key, (long long)x, (long long)sizes[i].min);
    }
    r->pieces = (uint64_t)f.pieces, r->piece_bytes = (uint64_t)f.piece_bytes, r->span_bytes = (uint64_t)f.span;
    r->bytes = (uint64_t)f.bytes, r->flops = (uint64_t)f.flops, r->us = (uint64_t)f.us;
    r->m = (uint64_t)f.m, r->n = (uint64_t)f.n, r->k = (uint64_t)f.k;
    if (rf_kind_is_transfer(f.path)) {
        if (r->piece_bytes & (r->piece_bytes - 1))
            return cfg_error(e, ERR_INVAL, cfg_get(n, "piece_bytes"), "piece_bytes %llu is not a power of two",
                             (unsigned long long)r->piece_bytes);
        if (r->pieces * r->piece_bytes > r->span_bytes)
            return cfg_error(e, ERR_RANGE, cfg_get(n, "span"), "span %llu is below pieces x piece_bytes = %llu",
                             (unsigned long long)r->span_bytes, (unsigned long long)(r->pieces * r->piece_bytes));
    }
    *after = f.after;
    return ERR_OK;
}

/* The op of list `list` named id, or -1. */
static int find_id(const uplan_t *u, int list, const char *id, uint32_t below)
{
    for (uint32_t i = 0; i < below && i < u->n_ops[list]; i++)
        if (*u->ops[list][i].id && !strcmp(u->ops[list][i].id, id)) return (int)i;
    return -1;
}

/* Resolves op i of list's `after` node into references. */
static int resolve_after(uplan_t *u, int list, uint32_t i, const cfg_node_t *after, err_t *e)
{
    uplan_op_t *o = &u->ops[list][i];
    if (!after) return ERR_OK;
    if (cfg_kind(after) != CFG_SEQ) return cfg_error(e, ERR_INVAL, after, "expected a list of op ids");
    if (cfg_size(after) > RF_MAX_AFTER) return cfg_error(e, ERR_RANGE, after, "at most %d ids", RF_MAX_AFTER);
    for (size_t j = 0; j < cfg_size(after); j++) {
        const cfg_node_t *v = cfg_at(after, j);
        const char *s = cfg_str(v);
        if (!s) return cfg_error(e, ERR_INVAL, v, "expected an op id");
        uplan_ref_t r = {(uint8_t)list, 0, 0};
        const char *id = s;
        unsigned back = 0;
        int used = 0;
        if (!strncmp(s, "prev.", 5)) back = 1, used = 5;
        else if (sscanf(s, "prev%u.%n", &back, &used) == 1 && used > 0 && (back < 1 || back > UPLAN_MAX_BACK))
            return cfg_error(e, ERR_INVAL, v, "'%s': prevK. reaches 1 to %d layers back", s, UPLAN_MAX_BACK);
        if (used > 0 && back > 0) {
            if (list == UPLAN_STEP) return cfg_error(e, ERR_INVAL, v, "'%s': a step op has no previous layer", s);
            r.list = UPLAN_LAYER, r.back = (uint8_t)back, id = s + used;
        } else if (!strncmp(s, "step.", 5)) {
            if (list == UPLAN_STEP) return cfg_error(e, ERR_INVAL, v, "'%s': write a step op's id alone", s);
            r.list = UPLAN_STEP, id = s + 5;
        }
        /* an op of the same list must come before it: anything else would wait on work issued later */
        uint32_t below = r.list == list && !r.back ? i : UINT32_MAX;
        int k = find_id(u, r.list, id, below);
        if (k < 0) {
            if (r.list == list && !r.back && find_id(u, r.list, id, UINT32_MAX) >= 0)
                return cfg_error(e, ERR_INVAL, v, "'%s' is not before this op (a forward or self dependency: a cycle)", s);
            return cfg_error(e, ERR_INVAL, v, "no op '%s' in the %s list", id, list_names[r.list]);
        }
        r.op = (uint32_t)k;
        for (uint32_t q = 0; q < o->n_after; q++)
            if (o->after[q].list == r.list && o->after[q].back == r.back && o->after[q].op == r.op)
                return cfg_error(e, ERR_INVAL, v, "'%s' twice", s);
        o->after[o->n_after++] = r;
    }
    return ERR_OK;
}

static int read_list(uplan_t *u, int list, const cfg_node_t *seq, err_t *e)
{
    if (!seq) return ERR_OK;
    if (cfg_kind(seq) != CFG_SEQ) return cfg_error(e, ERR_INVAL, seq, "expected a list of ops");
    size_t n = cfg_size(seq);
    if (n > RF_MAX_OPS) return cfg_error(e, ERR_RANGE, seq, "more than %d ops", RF_MAX_OPS);
    u->ops[list] = calloc(n ? n : 1, sizeof *u->ops[list]);
    const cfg_node_t **after = calloc(n ? n : 1, sizeof *after);
    int rc = u->ops[list] && after ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        const cfg_node_t *v = cfg_at(seq, i);
        uplan_op_t *o = &u->ops[list][i];
        rc = read_op(v, false, o, &after[i], e);
        if (!rc && *o->id && find_id(u, list, o->id, (uint32_t)i) >= 0)
            rc = cfg_error(e, ERR_INVAL, cfg_get(v, "id"), "id '%s' twice in the %s list", o->id, list_names[list]);
        if (!rc && u->region_bytes && rf_kind_is_transfer(o->op.kind) && o->op.span_bytes > u->region_bytes)
            rc = cfg_error(e, ERR_RANGE, cfg_get(v, "span"), "span %llu is above the plan's region %llu",
                           (unsigned long long)o->op.span_bytes, (unsigned long long)u->region_bytes);
        u->n_ops[list] = (uint32_t)i + 1;
    }
    if (rc) u->n_ops[list] = 0;
    for (size_t i = 0; !rc && i < n; i++) rc = resolve_after(u, list, (uint32_t)i, after[i], e);
    free(after);
    return rc;
}

/* ---- edits ------------------------------------------------------------------------------------ */

typedef struct edit_fields {
    const cfg_node_t *match, *after, *replace, *add;
    int64_t us;
    int scale;
    bool drop;
} edit_fields_t;

#define E_(key, type, field, dflt, lo, hi, ch, doc) {key, type, offsetof(edit_fields_t, field), dflt, lo, hi, ch, doc}
static const cfg_param_t edit_params[] = {
    E_("match", CFG_T_NODE, match, NULL, 1, 0, NULL, "the ops set, dropped or replaced: {kind, layer}"),
    E_("after", CFG_T_NODE, after, NULL, 1, 0, NULL, "add: the ops the new op follows, {kind, layer}"),
    E_("us", CFG_T_INT, us, "0", 0, 1e7, NULL, "the matched op's time, microseconds"),
    E_("scale", CFG_T_ENUM, scale, "fixed", 1, 0, scale_names, "us: fixed, or grown with the context"),
    E_("drop", CFG_T_BOOL, drop, "false", 1, 0, NULL, "remove the matched op"),
    E_("replace", CFG_T_NODE, replace, NULL, 1, 0, NULL, "the op replacing the matched op"),
    E_("add", CFG_T_NODE, add, NULL, 1, 0, NULL, "a new op after each op `after` matches"),
};
#undef E_

typedef struct match_fields {
    const char *kind;
    int64_t layer;
} match_fields_t;

static const cfg_param_t match_params[] = {
    {"kind", CFG_T_STRING, offsetof(match_fields_t, kind), NULL, 1, 0, NULL, "the op kind matched"},
    {"layer", CFG_T_INT, offsetof(match_fields_t, layer), "-1", -1, UPLAN_MAX_LAYERS - 1, NULL,
     "the layer matched; -1: every op of the kind"},
};

static int read_match(const cfg_node_t *n, uplan_edit_t *d, err_t *e)
{
    match_fields_t m;
    if (cfg_kind(n) != CFG_MAP) return cfg_error(e, ERR_INVAL, n, "expected {kind: K, layer: L}");
    int rc = cfg_bind(n, match_params, 2, &m, e);
    if (rc) return rc;
    d->kind = opkind_find(m.kind);
    if (d->kind < 0) return cfg_error(e, ERR_INVAL, cfg_get(n, "kind"), "unknown op kind '%s'", m.kind);
    d->layer = (int)m.layer;
    return ERR_OK;
}

static int read_edit(const cfg_node_t *n, uplan_edit_t *d, err_t *e)
{
    edit_fields_t f;
    memset(d, 0, sizeof *d);
    if (cfg_kind(n) != CFG_MAP) return cfg_error(e, ERR_INVAL, n, "expected an edit: a map with match (or after)");
    int rc = cfg_bind(n, edit_params, sizeof edit_params / sizeof *edit_params, &f, e);
    if (rc) return rc;
    where_of(n, d->where);
    int actions = (cfg_get(n, "us") != NULL) + f.drop + (f.replace != NULL) + (f.add != NULL);
    if (actions != 1) return cfg_error(e, ERR_INVAL, n, "an edit does one of us, drop: true, replace, add");
    if (f.add ? !f.after || f.match : !f.match || f.after)
        return cfg_error(e, ERR_INVAL, n, f.add ? "add takes after: {kind, ...} (and no match)" : "an edit takes match: {kind, ...}");
    const cfg_node_t *v = cfg_get(n, "scale");
    if (v && !cfg_get(n, "us")) return cfg_error(e, ERR_INVAL, v, "scale applies to us (an op's own scale is in it)");
    rc = read_match(f.add ? f.after : f.match, d, e);
    const cfg_node_t *after_unused;
    if (!rc && f.replace) rc = read_op(f.replace, true, &d->op, &after_unused, e);
    if (!rc && f.add) rc = read_op(f.add, true, &d->op, &after_unused, e);
    d->what = f.add ? UPLAN_EDIT_ADD : f.replace ? UPLAN_EDIT_REPLACE : f.drop ? UPLAN_EDIT_DROP : UPLAN_EDIT_US;
    if (d->what == UPLAN_EDIT_US) {
        /* the time is a spin's, grown with the context as an op's sizes are */
        d->op.op.kind = RF_OP_SPIN;
        d->op.op.us = (uint64_t)f.us;
        d->op.scale_context = f.scale == 1;
        snprintf(d->op.where, sizeof d->op.where, "%s", d->where);
    }
    return rc;
}

/* ---- the file --------------------------------------------------------------------------------- */

typedef struct top_fields {
    int64_t version, context, layers, region;
    const char *name;
    const cfg_node_t *list[UPLAN_LISTS], *edit;
} top_fields_t;

#define T_(key, type, field, dflt, lo, hi, doc) {key, type, offsetof(top_fields_t, field), dflt, lo, hi, NULL, doc}
static const cfg_param_t top_params[] = {
    T_("odsim_plan", CFG_T_INT, version, NULL, UPLAN_VERSION, UPLAN_VERSION, "the format's version"),
    T_("name", CFG_T_STRING, name, NULL, 1, 0, "the plan's name (A-Z a-z 0-9 _ . -, 1-63)"),
    T_("context", CFG_T_INT, context, NULL, 1, 4294967296.0, "tokens the sizes are stated at"),
    T_("layers", CFG_T_INT, layers, "0", 0, UPLAN_MAX_LAYERS, "whole plan: layers; 0: the model's"),
    T_("region", CFG_T_INT, region, "0", 0, (double)RF_MAX_REGION_BYTES, "whole plan: host bytes held; 0: the widest span"),
    T_("step", CFG_T_NODE, list[UPLAN_STEP], NULL, 1, 0, "ops once per step, before the layers"),
    T_("layer", CFG_T_NODE, list[UPLAN_LAYER], NULL, 1, 0, "ops of every layer"),
    T_("end", CFG_T_NODE, list[UPLAN_END], NULL, 1, 0, "ops once per step, after the layers"),
    T_("edit", CFG_T_NODE, edit, NULL, 1, 0, "edits of the built-in plan"),
};
#undef T_

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > RF_NAME_MAX) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' ||
              *s == '-'))
            return false;
    return true;
}

static int read_plan(const cfg_doc_t *doc, uplan_t *u, err_t *e)
{
    const cfg_node_t *root = cfg_root(doc);
    top_fields_t f;
    if (cfg_kind(root) != CFG_MAP) return cfg_error(e, ERR_INVAL, root, "expected a plan: a map beginning odsim_plan: 1");
    int rc = cfg_bind(root, top_params, sizeof top_params / sizeof *top_params, &f, e);
    if (rc) return rc;
    if (!name_ok(f.name)) return cfg_error(e, ERR_INVAL, cfg_get(root, "name"), "'%s' is not 1-63 characters of A-Z a-z 0-9 _ . -", f.name);
    snprintf(u->name, sizeof u->name, "%s", f.name);
    u->context = (uint64_t)f.context;
    u->layers = (int)f.layers;
    u->region_bytes = (uint64_t)f.region;
    if (u->region_bytes % 4096) return cfg_error(e, ERR_INVAL, cfg_get(root, "region"), "region %llu is not a multiple of 4096", (unsigned long long)u->region_bytes);
    u->whole = f.list[UPLAN_STEP] || f.list[UPLAN_LAYER] || f.list[UPLAN_END];
    const cfg_node_t *whole_key = cfg_get(root, "layers") ? cfg_get(root, "layers") : cfg_get(root, "region");
    if (f.edit && (u->whole || whole_key))
        return cfg_error(e, ERR_INVAL, f.edit, "a plan is whole (step, layer, end) or edits, not both");
    if (!f.edit && !u->whole) return cfg_error(e, ERR_INVAL, root, "a plan needs step, layer or end ops, or edit");
    for (int l = 0; !rc && l < UPLAN_LISTS; l++) rc = read_list(u, l, f.list[l], e);
    if (!rc && u->whole && u->n_ops[UPLAN_STEP] + u->n_ops[UPLAN_LAYER] + u->n_ops[UPLAN_END] == 0)
        rc = cfg_error(e, ERR_INVAL, root, "a whole plan needs at least one op");
    if (rc || !f.edit) return rc;
    if (cfg_kind(f.edit) != CFG_SEQ || !cfg_size(f.edit)) return cfg_error(e, ERR_INVAL, f.edit, "expected a list of edits");
    u->edits = calloc(cfg_size(f.edit), sizeof *u->edits);
    if (!u->edits) return err_set(e, ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < cfg_size(f.edit); i++) {
        rc = read_edit(cfg_at(f.edit, i), &u->edits[i], e);
        u->n_edits = (uint32_t)i + 1;
    }
    return rc;
}

static int finish(cfg_doc_t *doc, int rc, const char *name, uplan_t **out, err_t *e)
{
    uplan_t *u = NULL;
    if (!rc) {
        u = calloc(1, sizeof *u);
        rc = u ? read_plan(doc, u, e) : err_set(e, ERR_NOMEM, "out of memory");
    }
    cfg_free(doc);
    if (rc) {
        uplan_free(u);
        return rc;
    }
    snprintf(u->file, sizeof u->file, "%s", name);
    *out = u;
    return ERR_OK;
}

int uplan_load(const char *path, uplan_t **out, err_t *e)
{
    cfg_doc_t *doc = NULL;
    *out = NULL;
    int rc = cfg_parse_file(path, &doc, e);
    return finish(doc, rc, path, out, e);
}

int uplan_parse(const char *name, const char *text, size_t len, uplan_t **out, err_t *e)
{
    cfg_doc_t *doc = NULL;
    *out = NULL;
    int rc = cfg_parse_string(name, text, len, &doc, e);
    return finish(doc, rc, name, out, e);
}

void uplan_free(uplan_t *u)
{
    if (!u) return;
    for (int l = 0; l < UPLAN_LISTS; l++) free(u->ops[l]);
    free(u->edits);
    free(u);
}

int uplan_layers(const uplan_t *u, int model_layers) { return u->layers > 0 ? u->layers : model_layers; }

/* ---- evaluation at a context ------------------------------------------------------------------ */

/* x grown by n/c, rounded up (exact: x = q·c + r, r·n < 2^64 for c, n ≤ 2^32); *ok false on overflow. */
static uint64_t grow(uint64_t x, uint64_t n, uint64_t c, bool *ok)
{
    uint64_t q = x / c, r = x % c;
    if (n && q > (UINT64_MAX - c) / n) {
        *ok = false;
        return UINT64_MAX;
    }
    return q * n + (r * n + c - 1) / c;
}

int uplan_eval_op(const uplan_t *u, const uplan_op_t *o, uint64_t n, rf_op_t *r, err_t *e)
{
    *r = o->op;
    r->n_after = 0;
    if (!o->scale_context || n == u->context) return ERR_OK;
    bool ok = true;
    uint64_t *sz[] = {&r->pieces, &r->span_bytes, &r->bytes, &r->flops, &r->us};
    for (size_t i = 0; i < sizeof sz / sizeof *sz; i++) {
        bool had = *sz[i] > 0;
        *sz[i] = grow(*sz[i], n, u->context, &ok);
        if (had && !*sz[i] && sz[i] != &r->us) *sz[i] = 1;
    }
    if (rf_kind_is_transfer(r->kind) && r->span_bytes < r->pieces * r->piece_bytes) r->span_bytes = r->pieces * r->piece_bytes;
    const char *bad = !ok ? "a size overflows"
                      : rf_kind_is_transfer(r->kind) && r->pieces > (1u << 20) ? "pieces above 2^20"
                      : rf_kind_is_transfer(r->kind) && r->span_bytes > RF_MAX_REGION_BYTES ? "span above 64 GiB"
                      : r->bytes > (64ull << 30) ? "bytes above 64 GiB"
                      : r->flops > 1000000000000000ull ? "flops above 10^15"
                      : r->us > 10000000 ? "us above 10^7" : NULL;
    if (bad)
        return err_set(e, ERR_RANGE, "%s: op '%s' at context %llu (scale: context from %llu): %s", o->where,
                       *o->id ? o->id : path_names[o->op.kind], (unsigned long long)n, (unsigned long long)u->context, bad);
    return ERR_OK;
}

int uplan_session(const uplan_t *u, uint64_t context, int layers, rf_session_t *s, replay_label_t *labels, err_t *e)
{
    memset(s, 0, sizeof *s);
    if (!u->whole) return err_set(e, ERR_INVAL, "%s: a plan of edits has no step of its own", u->file);
    uint32_t S = u->n_ops[UPLAN_STEP], Y = u->n_ops[UPLAN_LAYER], N = u->n_ops[UPLAN_END];
    uint64_t total = S + (uint64_t)layers * Y + N;
    if (total > RF_MAX_OPS)
        return err_set(e, ERR_RANGE, "%s: a step of %d layers has %llu ops, above the %d a replay session holds", u->file,
                       layers, (unsigned long long)total, RF_MAX_OPS);
    uint64_t widest = 0;
    for (int part = 0; part < 2 + layers; part++) {
        /* part 0: step, 1..layers: layer part-1, last: end */
        int list = part == 0 ? UPLAN_STEP : part <= layers ? UPLAN_LAYER : UPLAN_END;
        int layer = list == UPLAN_LAYER ? part - 1 : -1;
        uint32_t base = list == UPLAN_STEP ? 0 : list == UPLAN_LAYER ? S + (uint32_t)layer * Y : S + (uint32_t)layers * Y;
        /* the layer prevK. counts back from: the op's own, or for end ops one past the last */
        int from = list == UPLAN_END ? layers : layer;
        for (uint32_t i = 0; i < u->n_ops[list]; i++) {
            const uplan_op_t *o = &u->ops[list][i];
            rf_op_t *r = &s->ops[base + i];
            int rc = uplan_eval_op(u, o, context, r, e);
            if (rc) return rc;
            for (uint32_t a = 0; a < o->n_after; a++) {
                const uplan_ref_t *ref = &o->after[a];
                int at = from - ref->back;
                if (ref->list == UPLAN_LAYER && at < 0) continue;   /* before layer 0: nothing to wait for */
                uint32_t id = ref->list == UPLAN_STEP ? ref->op : ref->list == UPLAN_LAYER ? S + (uint32_t)at * Y + ref->op
                                                                                           : base + ref->op;
                r->after[r->n_after++] = id;
            }
            if (rf_kind_is_transfer(r->kind) && r->span_bytes > widest) widest = r->span_bytes;
            if (labels) labels[base + i] = (replay_label_t){o->kind, layer < 0 ? PLAN_NO_LAYER : (uint16_t)layer};
        }
    }
    s->n_ops = (uint32_t)total;
    bool ok = true;
    uint64_t region = u->region_bytes ? grow(u->region_bytes, context, u->context, &ok) : 0;
    if (region < widest) region = widest;
    region = (region + 4095) / 4096 * 4096;
    if (!ok || region > RF_MAX_REGION_BYTES)
        return err_set(e, ERR_RANGE, "%s: the region at context %llu is above the 64 GiB a replay session holds", u->file,
                       (unsigned long long)context);
    s->region_bytes = region ? region : 4096;
    return ERR_OK;
}

int uplan_build_whole(const uplan_t *u, uint64_t context, int layers, const hw_t *hw, const cost_t *cost,
                      const sim_t *sim, int gpu, plan_t *out, err_t *e)
{
    rf_session_t *s = malloc(sizeof *s);
    replay_label_t *labels = malloc(RF_MAX_OPS * sizeof *labels);
    uint32_t *plan_of = malloc(RF_MAX_OPS * sizeof *plan_of);
    cost_paths_t paths;
    int rc = s && labels && plan_of ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
    if (!rc) rc = uplan_session(u, context, layers, s, labels, e);
    if (!rc) rc = cost_paths_resolve(cost, hw, sim, gpu, HWINST_DRAM, &paths, e);
    if (!rc) rc = replay_cost_session(s, cost, &paths, labels, out, plan_of, e);
    if (rc) err_prefix(e, "plan '%s'", u->name);
    free(s);
    free(labels);
    free(plan_of);
    return rc;
}
