#include "common/cfg.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/atomicio.h"
#include "common/str.h"

#define CFG_MAX_DEPTH 64

struct cfg_node {
    cfg_kind_t kind;
    bool quoted;
    bool consumed;     /* read through cfg_get/cfg_at/cfg_bind */
    char *str;         /* scalar text */
    char **keys;       /* map keys (NULL for sequences) */
    cfg_node_t **vals; /* map values or sequence items */
    size_t n, cap;
    char *file, *path;
    int line, col;
};

struct cfg_doc {
    cfg_node_t *root;
};

/* ---- nodes ---------------------------------------------------------------------------------- */

static void node_free(cfg_node_t *n)
{
    if (!n) return;
    for (size_t i = 0; i < n->n; i++) {
        if (n->keys) free(n->keys[i]);
        node_free(n->vals[i]);
    }
    free(n->keys);
    free(n->vals);
    free(n->str);
    free(n->file);
    free(n->path);
    free(n);
}

static cfg_node_t *node_new(cfg_kind_t kind, const char *file, int line, int col, const char *path)
{
    cfg_node_t *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->kind = kind;
    n->line = line;
    n->col = col;
    n->file = strdup(file ? file : "");
    n->path = strdup(path ? path : "");
    if (!n->file || !n->path) {
        node_free(n);
        return NULL;
    }
    return n;
}

/* Appends (key, val) to a map or val to a sequence (key NULL). Takes ownership of val. */
static int node_push(cfg_node_t *n, const char *key, cfg_node_t *val)
{
    if (n->n == n->cap) {
        size_t cap = n->cap ? 2 * n->cap : 4;
        cfg_node_t **vals = realloc(n->vals, cap * sizeof *vals);
        if (!vals) return ERR_NOMEM;
        n->vals = vals;
        if (n->kind == CFG_MAP) {
            char **keys = realloc(n->keys, cap * sizeof *keys);
            if (!keys) return ERR_NOMEM;
            n->keys = keys;
        }
        n->cap = cap;
    }
    if (n->kind == CFG_MAP) {
        n->keys[n->n] = strdup(key);
        if (!n->keys[n->n]) return ERR_NOMEM;
    }
    n->vals[n->n++] = val;
    return ERR_OK;
}

static long map_index(const cfg_node_t *map, const char *key)
{
    if (!map || map->kind != CFG_MAP) return -1;
    for (size_t i = 0; i < map->n; i++)
        if (!strcmp(map->keys[i], key)) return (long)i;
    return -1;
}

static char *path_join(const char *parent, const char *key)
{
    size_t n = strlen(parent) + strlen(key) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s%s", parent, *parent ? "." : "", key);
    return p;
}

static char *path_index(const char *parent, size_t i)
{
    size_t n = strlen(parent) + 24;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s[%zu]", parent, i);
    return p;
}

/* Deep copy of n whose key path becomes `path`. */
static cfg_node_t *node_copy(const cfg_node_t *n, const char *path)
{
    cfg_node_t *c = node_new(n->kind, n->file, n->line, n->col, path);
    if (!c) return NULL;
    c->quoted = n->quoted;
    if (n->str && !(c->str = strdup(n->str))) goto fail;
    for (size_t i = 0; i < n->n; i++) {
        char *cp = n->kind == CFG_MAP ? path_join(path, n->keys[i]) : path_index(path, i);
        cfg_node_t *v = cp ? node_copy(n->vals[i], cp) : NULL;
        free(cp);
        if (!v || node_push(c, n->kind == CFG_MAP ? n->keys[i] : NULL, v)) {
            node_free(v);
            goto fail;
        }
    }
    return c;
fail:
    node_free(c);
    return NULL;
}

/* ---- errors --------------------------------------------------------------------------------- */

static int verror(err_t *e, int code, const cfg_node_t *n, const char *fmt, va_list ap)
{
    char what[ERR_MSG_MAX];
    vsnprintf(what, sizeof what, fmt, ap);
    if (!n) return err_set(e, code, "%s", what);
    if (*n->path)
        return err_set(e, code, "%s:%d:%d: key '%s': %s", n->file, n->line, n->col, n->path, what);
    return err_set(e, code, "%s:%d:%d: %s", n->file, n->line, n->col, what);
}

int cfg_error(err_t *e, int code, const cfg_node_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = verror(e, code, n, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- parsing -------------------------------------------------------------------------------- */

typedef struct parser {
    yaml_parser_t yp;
    const char *name;
    err_t *e;
} parser_t;

static int parse_fail(parser_t *p, const yaml_mark_t *m, const char *what)
{
    /* libyaml marks are 0-based. */
    return err_set(p->e, ERR_PARSE, "%s:%zu:%zu: %s", p->name, m->line + 1, m->column + 1, what);
}

static int next_event(parser_t *p, yaml_event_t *ev)
{
    if (yaml_parser_parse(&p->yp, ev)) return ERR_OK;
    const yaml_mark_t *m = &p->yp.problem_mark;
    char what[512];
    snprintf(what, sizeof what, "YAML syntax error: %s%s%s", p->yp.problem ? p->yp.problem : "unknown",
             p->yp.context ? " " : "", p->yp.context ? p->yp.context : "");
    return parse_fail(p, m, what);
}

static int parse_node(parser_t *p, yaml_event_t *ev, const char *path, int depth, cfg_node_t **out);

static int reject_anchor(parser_t *p, const yaml_event_t *ev, const yaml_char_t *anchor)
{
    if (ev->type == YAML_ALIAS_EVENT)
        return parse_fail(p, &ev->start_mark, "aliases (*name) are not supported: write the value out");
    if (anchor) return parse_fail(p, &ev->start_mark, "anchors (&name) are not supported");
    return ERR_OK;
}

/* The keys of a map being parsed, hashed (open addressing), with their lines: each duplicate check
 * is O(1) (a linear scan per key took 31 s on 80K keys). */
typedef struct keyset {
    uint32_t *slot; /* index into the map's keys + 1; 0: empty */
    size_t mask;    /* slots - 1 (a power of two) */
    int *line;      /* line of key i */
} keyset_t;

static size_t keyset_home(const keyset_t *ks, const char *key) { return (size_t)str_fnv1a(key, strlen(key)) & ks->mask; }

/* Index of key in map (whose keys ks holds), or -1. */
static long keyset_find(const keyset_t *ks, const cfg_node_t *map, const char *key)
{
    if (!ks->slot) return -1;
    for (size_t h = keyset_home(ks, key); ks->slot[h]; h = (h + 1) & ks->mask)
        if (!strcmp(map->keys[ks->slot[h] - 1], key)) return (long)ks->slot[h] - 1;
    return -1;
}

/* Adds map's last key (at `line`), growing the table to keep it at most half full. */
static int keyset_add(keyset_t *ks, const cfg_node_t *map, int line)
{
    size_t n = map->n;
    if (!ks->slot || 2 * n > ks->mask + 1) {
        size_t cap = 16;
        while (cap < 4 * n) cap *= 2;
        uint32_t *slot = calloc(cap, sizeof *slot);
        int *lines = realloc(ks->line, cap * sizeof *lines);
        if (!slot || !lines) {
            free(slot);
            if (lines) ks->line = lines;
            return ERR_NOMEM;
        }
        free(ks->slot);
        *ks = (keyset_t){slot, cap - 1, lines};
        for (size_t i = 0; i + 1 < n; i++) {
            size_t h = keyset_home(ks, map->keys[i]);
            while (ks->slot[h]) h = (h + 1) & ks->mask;
            ks->slot[h] = (uint32_t)i + 1;
        }
    }
    size_t h = keyset_home(ks, map->keys[n - 1]);
    while (ks->slot[h]) h = (h + 1) & ks->mask;
    ks->slot[h] = (uint32_t)n;
    ks->line[n - 1] = line;
    return ERR_OK;
}

static int parse_map_keys(parser_t *p, cfg_node_t *map, int depth, keyset_t *ks)
{
    for (;;) {
        yaml_event_t kev;
        int rc = next_event(p, &kev);
        if (rc) return rc;
        if (kev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&kev);
            return ERR_OK;
        }
        if (kev.type != YAML_SCALAR_EVENT) {
            rc = kev.type == YAML_ALIAS_EVENT ? reject_anchor(p, &kev, NULL)
                                              : parse_fail(p, &kev.start_mark, "a map key must be a plain scalar");
            yaml_event_delete(&kev);
            return rc;
        }
        const char *key = (const char *)kev.data.scalar.value;
        rc = reject_anchor(p, &kev, kev.data.scalar.anchor);
        if (!rc && !strcmp(key, "<<") && !kev.data.scalar.quoted_implicit)
            rc = parse_fail(p, &kev.start_mark, "merge keys (<<) are not supported: use a preset and overrides");
        long first = rc ? -1 : keyset_find(ks, map, key);
        if (first >= 0) {
            char what[256];
            snprintf(what, sizeof what, "duplicate key '%s' (first at line %d)", key, ks->line[first]);
            rc = parse_fail(p, &kev.start_mark, what);
        }
        char *cpath = rc ? NULL : path_join(map->path, key);
        if (!rc && !cpath) rc = err_set(p->e, ERR_NOMEM, "out of memory");
        cfg_node_t *val = NULL;
        if (!rc) {
            yaml_event_t vev;
            rc = next_event(p, &vev);
            if (!rc) rc = parse_node(p, &vev, cpath, depth + 1, &val);
        }
        if (!rc && node_push(map, key, val)) {
            node_free(val);
            rc = err_set(p->e, ERR_NOMEM, "out of memory");
        }
        if (!rc && keyset_add(ks, map, (int)kev.start_mark.line + 1)) rc = err_set(p->e, ERR_NOMEM, "out of memory");
        free(cpath);
        yaml_event_delete(&kev);
        if (rc) return rc;
    }
}

static int parse_map(parser_t *p, cfg_node_t *map, int depth)
{
    keyset_t ks = {0};
    int rc = parse_map_keys(p, map, depth, &ks);
    free(ks.slot);
    free(ks.line);
    return rc;
}

static int parse_seq(parser_t *p, cfg_node_t *seq, int depth)
{
    for (;;) {
        yaml_event_t ev;
        int rc = next_event(p, &ev);
        if (rc) return rc;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return ERR_OK;
        }
        char *cpath = path_index(seq->path, seq->n);
        cfg_node_t *val = NULL;
        rc = cpath ? parse_node(p, &ev, cpath, depth + 1, &val) : err_set(p->e, ERR_NOMEM, "out of memory");
        free(cpath);
        if (!rc && node_push(seq, NULL, val)) {
            node_free(val);
            rc = err_set(p->e, ERR_NOMEM, "out of memory");
        }
        if (rc) return rc;
    }
}

/* Builds the node that starts with *ev (consumed and deleted here). */
static int parse_node(parser_t *p, yaml_event_t *ev, const char *path, int depth, cfg_node_t **out)
{
    *out = NULL;
    int rc = ERR_OK;
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
    if (depth > CFG_MAX_DEPTH) {
        rc = parse_fail(p, &ev->start_mark, "nesting too deep");
    } else if (ev->type == YAML_SCALAR_EVENT) {
        rc = reject_anchor(p, ev, ev->data.scalar.anchor);
        cfg_node_t *n = rc ? NULL : node_new(CFG_SCALAR, p->name, line, col, path);
        if (!rc && (!n || !(n->str = strdup((const char *)ev->data.scalar.value)))) {
            node_free(n);
            n = NULL;
            rc = err_set(p->e, ERR_NOMEM, "out of memory");
        }
        if (n) n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        *out = n;
    } else if (ev->type == YAML_MAPPING_START_EVENT || ev->type == YAML_SEQUENCE_START_EVENT) {
        bool is_map = ev->type == YAML_MAPPING_START_EVENT;
        rc = reject_anchor(p, ev, is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor);
        cfg_node_t *n = rc ? NULL : node_new(is_map ? CFG_MAP : CFG_SEQ, p->name, line, col, path);
        if (!rc && !n) rc = err_set(p->e, ERR_NOMEM, "out of memory");
        if (!rc) rc = is_map ? parse_map(p, n, depth) : parse_seq(p, n, depth);
        if (rc) node_free(n);
        else *out = n;
    } else {
        rc = reject_anchor(p, ev, NULL);
        if (!rc) rc = parse_fail(p, &ev->start_mark, "unexpected YAML event");
    }
    yaml_event_delete(ev);
    return rc;
}

static int expect_event(parser_t *p, yaml_event_type_t type, const char *what)
{
    yaml_event_t ev;
    int rc = next_event(p, &ev);
    if (rc) return rc;
    if (ev.type != type) rc = parse_fail(p, &ev.start_mark, what);
    yaml_event_delete(&ev);
    return rc;
}

static int parse_stream(parser_t *p, cfg_node_t **root)
{
    *root = NULL;
    int rc = expect_event(p, YAML_STREAM_START_EVENT, "expected a YAML stream");
    if (rc) return rc;
    yaml_event_t ev;
    if ((rc = next_event(p, &ev))) return rc;
    if (ev.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&ev);
        *root = node_new(CFG_MAP, p->name, 1, 1, "");
        return *root ? ERR_OK : err_set(p->e, ERR_NOMEM, "out of memory");
    }
    yaml_event_delete(&ev); /* DOCUMENT-START */
    if ((rc = next_event(p, &ev))) return rc;
    if (ev.type == YAML_DOCUMENT_END_EVENT) { /* empty document */
        yaml_event_delete(&ev);
        *root = node_new(CFG_MAP, p->name, 1, 1, "");
        if (!*root) return err_set(p->e, ERR_NOMEM, "out of memory");
    } else {
        if ((rc = parse_node(p, &ev, "", 0, root))) return rc;
        if ((rc = expect_event(p, YAML_DOCUMENT_END_EVENT, "expected the end of the document"))) goto fail;
    }
    if ((rc = next_event(p, &ev))) goto fail;
    if (ev.type != YAML_STREAM_END_EVENT) {
        rc = parse_fail(p, &ev.start_mark, "more than one YAML document: only one is allowed");
        yaml_event_delete(&ev);
        goto fail;
    }
    yaml_event_delete(&ev);
    return ERR_OK;
fail:
    node_free(*root);
    *root = NULL;
    return rc;
}

int cfg_parse_string(const char *name, const char *text, size_t len, cfg_doc_t **out, err_t *e)
{
    *out = NULL;
    parser_t p = {.name = name ? name : "<string>", .e = e};
    /* libyaml ends the stream at a NUL byte: what follows would be dropped silently */
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        int line = 1;
        for (const char *c = text; c < nul; c++) line += *c == '\n';
        return err_set(e, ERR_PARSE, "%s:%d: a NUL byte: YAML is text", p.name, line);
    }
    if (!yaml_parser_initialize(&p.yp)) return err_set(e, ERR_NOMEM, "%s: cannot start the YAML parser", p.name);
    yaml_parser_set_input_string(&p.yp, (const unsigned char *)text, len);
    cfg_node_t *root;
    int rc = parse_stream(&p, &root);
    yaml_parser_delete(&p.yp);
    if (rc) return rc;
    cfg_doc_t *doc = calloc(1, sizeof *doc);
    if (!doc) {
        node_free(root);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    doc->root = root;
    *out = doc;
    return ERR_OK;
}

int cfg_parse_file(const char *path, cfg_doc_t **out, err_t *e)
{
    *out = NULL;
    char *text;
    size_t len;
    int rc = atomicio_read_all(path, CFG_MAX_FILE_BYTES, &text, &len, e);
    if (rc) return rc;
    rc = cfg_parse_string(path, text, len, out, e);
    free(text);
    return rc;
}

void cfg_free(cfg_doc_t *doc)
{
    if (!doc) return;
    node_free(doc->root);
    free(doc);
}

cfg_node_t *cfg_root(const cfg_doc_t *doc) { return doc->root; }

static int doc_wrap(cfg_node_t *root, cfg_doc_t **out, err_t *e)
{
    *out = NULL;
    if (!root) return err_set(e, ERR_NOMEM, "out of memory");
    cfg_doc_t *doc = calloc(1, sizeof *doc);
    if (!doc) {
        node_free(root);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    doc->root = root;
    *out = doc;
    return ERR_OK;
}

int cfg_clone(const cfg_doc_t *doc, cfg_doc_t **out, err_t *e)
{
    return doc_wrap(node_copy(doc->root, ""), out, e);
}

int cfg_clone_without(const cfg_doc_t *doc, const char *key, cfg_doc_t **out, err_t *e)
{
    const cfg_node_t *r = doc->root;
    if (r->kind != CFG_MAP || map_index(r, key) < 0) return cfg_clone(doc, out, e);
    cfg_node_t *c = node_new(CFG_MAP, r->file, r->line, r->col, r->path);
    for (size_t i = 0; c && i < r->n; i++) {
        if (!strcmp(r->keys[i], key)) continue;
        char *cp = path_join(r->path, r->keys[i]);
        cfg_node_t *v = cp ? node_copy(r->vals[i], cp) : NULL;
        free(cp);
        if (!v || node_push(c, r->keys[i], v)) {
            node_free(v);
            node_free(c);
            c = NULL;
        }
    }
    return doc_wrap(c, out, e);
}

/* ---- preset + overrides -------------------------------------------------------------------- */

static int kind_clash(const cfg_node_t *dst, const cfg_node_t *over, err_t *e)
{
    return cfg_error(e, ERR_INVAL, over, "cannot lay a %s over a %s", over->kind == CFG_MAP ? "map" : "value",
                     dst->kind == CFG_MAP ? "map" : "value");
}

/* Lays the map `over` onto the map dst (a copy of the base, owned by the caller), in place. */
static int merge_into(cfg_node_t *dst, const cfg_node_t *over, bool strict, err_t *e)
{
    for (size_t i = 0; i < over->n; i++) {
        const char *key = over->keys[i];
        const cfg_node_t *ov = over->vals[i];
        long j = map_index(dst, key);
        if (j < 0 && strict) return cfg_error(e, ERR_INVAL, ov, "unknown key: the preset has no '%s'", key);
        if (j >= 0 && (dst->vals[j]->kind == CFG_MAP) != (ov->kind == CFG_MAP)) return kind_clash(dst->vals[j], ov, e);
        if (j >= 0 && ov->kind == CFG_MAP) {
            int rc = merge_into(dst->vals[j], ov, strict, e);
            if (rc) return rc;
            continue;
        }
        char *cp = path_join(dst->path, key);
        cfg_node_t *copy = cp ? node_copy(ov, cp) : NULL;
        free(cp);
        if (!copy) return err_set(e, ERR_NOMEM, "out of memory");
        if (j >= 0) {
            node_free(dst->vals[j]);
            dst->vals[j] = copy;
        } else if (node_push(dst, key, copy)) {
            node_free(copy);
            return err_set(e, ERR_NOMEM, "out of memory");
        }
    }
    return ERR_OK;
}

int cfg_merge(const cfg_node_t *base, const cfg_node_t *overlay, bool strict, cfg_doc_t **out, err_t *e)
{
    *out = NULL;
    if (overlay && (base->kind == CFG_MAP) != (overlay->kind == CFG_MAP)) return kind_clash(base, overlay, e);
    cfg_node_t *dst = node_copy(overlay && overlay->kind != CFG_MAP ? overlay : base, base->path);
    if (!dst) return err_set(e, ERR_NOMEM, "out of memory");
    int rc = overlay && overlay->kind == CFG_MAP ? merge_into(dst, overlay, strict, e) : ERR_OK;
    if (rc) {
        node_free(dst);
        return rc;
    }
    return doc_wrap(dst, out, e);
}

/* Finds or creates the map that holds the last key of `path` and returns it with that key. */
static int walk_to_parent(cfg_doc_t *doc, const char *path, const char *origin, cfg_node_t **parent,
                          char **last, err_t *e)
{
    *parent = NULL;
    *last = NULL;
    char *buf = strdup(path);
    if (!buf) return err_set(e, ERR_NOMEM, "out of memory");
    cfg_node_t *cur = doc->root;
    char *save = NULL, *tok = strtok_r(buf, ".", &save);
    if (!tok) {
        free(buf);
        return err_set(e, ERR_INVAL, "%s: empty key in '%s'", origin, path);
    }
    for (char *nxt; (nxt = strtok_r(NULL, ".", &save)); tok = nxt) {
        if (cur->kind != CFG_MAP) {
            free(buf);
            return err_set(e, ERR_INVAL, "%s: '%s': '%s' is not a map", origin, path, cur->path);
        }
        long j = map_index(cur, tok);
        if (j < 0) {
            char *cp = path_join(cur->path, tok);
            cfg_node_t *m = cp ? node_new(CFG_MAP, origin, 1, 1, cp) : NULL;
            free(cp);
            if (!m || node_push(cur, tok, m)) {
                node_free(m);
                free(buf);
                return err_set(e, ERR_NOMEM, "out of memory");
            }
            j = (long)cur->n - 1;
        }
        cur = cur->vals[j];
    }
    if (cur->kind != CFG_MAP) {
        free(buf);
        return err_set(e, ERR_INVAL, "%s: '%s': '%s' is not a map", origin, path, cur->path);
    }
    *last = strdup(tok);
    free(buf);
    if (!*last) return err_set(e, ERR_NOMEM, "out of memory");
    *parent = cur;
    return ERR_OK;
}

int cfg_set_node(cfg_doc_t *doc, const char *path, const cfg_node_t *value, err_t *e)
{
    cfg_node_t *parent;
    char *key;
    int rc = walk_to_parent(doc, path, cfg_file(value), &parent, &key, e);
    if (rc) return rc;
    char *cp = path_join(parent->path, key);
    cfg_node_t *copy = cp ? node_copy(value, cp) : NULL;
    free(cp);
    if (!copy) {
        free(key);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    long j = map_index(parent, key);
    if (j >= 0) {
        node_free(parent->vals[j]);
        parent->vals[j] = copy;
    } else if (node_push(parent, key, copy)) {
        node_free(copy);
        rc = err_set(e, ERR_NOMEM, "out of memory");
    }
    free(key);
    return rc;
}

int cfg_set(cfg_doc_t *doc, const char *assignment, const char *origin, err_t *e)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return err_set(e, ERR_INVAL, "%s '%s': expected key=value", origin, assignment);
    size_t klen = (size_t)(eq - assignment);
    char *key = strndup(assignment, klen);
    char name[256];
    snprintf(name, sizeof name, "%s %.*s", origin, (int)(klen > 200 ? 200 : klen), assignment);
    cfg_doc_t *val = NULL;
    const char *text = eq + 1;
    int rc = key ? cfg_parse_string(name, text, strlen(text), &val, e) : err_set(e, ERR_NOMEM, "out of memory");
    if (!rc && !*text) { /* `key=` sets an empty string, not an empty map */
        node_free(val->root);
        val->root = node_new(CFG_SCALAR, name, 1, 1, "");
        if (!val->root || !(val->root->str = strdup(""))) rc = err_set(e, ERR_NOMEM, "out of memory");
    }
    if (!rc) rc = cfg_set_node(doc, key, val->root, e);
    cfg_free(val);
    free(key);
    return rc;
}

/* ---- reading -------------------------------------------------------------------------------- */

cfg_kind_t cfg_kind(const cfg_node_t *n) { return n->kind; }
size_t cfg_size(const cfg_node_t *n) { return n->kind == CFG_SCALAR ? 0 : n->n; }

cfg_node_t *cfg_at(const cfg_node_t *n, size_t i)
{
    if (n->kind == CFG_SCALAR || i >= n->n) return NULL;
    n->vals[i]->consumed = true;
    return n->vals[i];
}

const char *cfg_key_at(const cfg_node_t *map, size_t i)
{
    return (map->kind == CFG_MAP && i < map->n) ? map->keys[i] : NULL;
}

cfg_node_t *cfg_get(const cfg_node_t *map, const char *key)
{
    long j = map_index(map, key);
    if (j < 0) return NULL;
    map->vals[j]->consumed = true;
    return map->vals[j];
}

cfg_node_t *cfg_path(const cfg_node_t *n, const char *path)
{
    char *buf = strdup(path);
    if (!buf) return NULL;
    cfg_node_t *cur = (cfg_node_t *)n;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ".", &save); tok && cur; tok = strtok_r(NULL, ".", &save))
        cur = cfg_get(cur, tok);
    free(buf);
    return cur;
}

const char *cfg_str(const cfg_node_t *n) { return n->kind == CFG_SCALAR ? n->str : NULL; }
bool cfg_quoted(const cfg_node_t *n) { return n->quoted; }
const char *cfg_file(const cfg_node_t *n) { return n->file; }
int cfg_line(const cfg_node_t *n) { return n->line; }
int cfg_col(const cfg_node_t *n) { return n->col; }
const char *cfg_keypath(const cfg_node_t *n) { return n->path; }

/* ---- typed scalars -------------------------------------------------------------------------- */

static int need_scalar(const cfg_node_t *n, const char *what, err_t *e)
{
    if (n->kind != CFG_SCALAR) return cfg_error(e, ERR_INVAL, n, "expected %s, got a %s", what, n->kind == CFG_MAP ? "map" : "list");
    if (n->quoted) return cfg_error(e, ERR_INVAL, n, "expected %s, got the quoted text \"%s\"", what, n->str);
    return ERR_OK;
}

/* Parses a finite number followed by an optional suffix from `units` (scaled by its factor). */
typedef struct unit { const char *name; double factor; } unit_t;

static int parse_number(const cfg_node_t *n, const char *what, const unit_t *units, double *out, err_t *e)
{
    int rc = need_scalar(n, what, e);
    if (rc) return rc;
    errno = 0;
    char *end;
    double v = strtod(n->str, &end);
    if (end == n->str || errno == ERANGE || !isfinite(v))
        return cfg_error(e, ERR_INVAL, n, "expected %s, got '%s'", what, n->str);
    while (*end == ' ') end++;
    if (!*end) {
        *out = v;
        return ERR_OK;
    }
    for (const unit_t *u = units; u && u->name; u++) {
        if (!strcmp(end, u->name)) {
            *out = v * u->factor;
            return ERR_OK;
        }
    }
    return cfg_error(e, ERR_INVAL, n, "expected %s, got '%s' (unknown suffix '%s')", what, n->str, end);
}

int cfg_double(const cfg_node_t *n, double *out, err_t *e)
{
    return parse_number(n, "a number", NULL, out, e);
}

static const unit_t count_units[] = {
    {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {NULL, 0}};

/* 2^53: a double holds every integer below it, and not every one above. */
#define CFG_EXACT_DOUBLE_INT 9007199254740992.0

int cfg_int64(const cfg_node_t *n, int64_t *out, err_t *e)
{
    int rc = need_scalar(n, "an integer", e);
    if (rc) return rc;
    /* Digits and a suffix are read exactly (a seed above 2^53 once collided with its neighbours). */
    errno = 0;
    char *end;
    long long v = strtoll(n->str, &end, 10);
    if (end != n->str && errno == ERANGE) return cfg_error(e, ERR_RANGE, n, "integer '%s' is too large", n->str);
    while (end != n->str && *end == ' ') end++;
    for (const unit_t *u = count_units; end != n->str && u->name; u++) {
        if (*end && strcmp(end, u->name)) continue;
        long long f = *end ? (long long)u->factor : 1;
        if (v > LLONG_MAX / f || v < LLONG_MIN / f) return cfg_error(e, ERR_RANGE, n, "integer '%s' is too large", n->str);
        *out = v * f;
        return ERR_OK;
    }
    /* Anything else (1e6, 1.5k) through a double, which is exact only below 2^53. */
    double d;
    rc = parse_number(n, "an integer", count_units, &d, e);
    if (rc) return rc;
    if (d != floor(d)) return cfg_error(e, ERR_INVAL, n, "expected an integer, got '%s'", n->str);
    if (fabs(d) >= CFG_EXACT_DOUBLE_INT)
        return cfg_error(e, ERR_RANGE, n, "integer '%s' is not exact beyond 2^53 as a number: write its digits", n->str);
    *out = (int64_t)d;
    return ERR_OK;
}

int cfg_bytes(const cfg_node_t *n, double *out, err_t *e)
{
    static const unit_t u[] = {{"B", 1}, {"kB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
                               {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                               {"TiB", 1099511627776.0}, {NULL, 0}};
    return parse_number(n, "a size in bytes", u, out, e);
}

int cfg_seconds(const cfg_node_t *n, double *out, err_t *e)
{
    static const unit_t u[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1},
                               {"min", 60}, {"h", 3600}, {NULL, 0}};
    return parse_number(n, "a duration", u, out, e);
}

int cfg_bool(const cfg_node_t *n, bool *out, err_t *e)
{
    int rc = need_scalar(n, "true or false", e);
    if (rc) return rc;
    static const char *const yes[] = {"true", "yes", "on", NULL}, *const no[] = {"false", "no", "off", NULL};
    for (int i = 0; yes[i]; i++) {
        if (!strcmp(n->str, yes[i])) { *out = true; return ERR_OK; }
        if (!strcmp(n->str, no[i])) { *out = false; return ERR_OK; }
    }
    return cfg_error(e, ERR_INVAL, n, "expected true or false, got '%s'", n->str);
}

/* ---- binding -------------------------------------------------------------------------------- */

/* Levenshtein distance, for "did you mean" on unknown keys. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return la > lb ? la : lb;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static int bind_scalar(const cfg_node_t *v, const cfg_param_t *p, void *field, err_t *e)
{
    double d;
    int64_t i;
    int rc = ERR_OK;
    if ((p->type == CFG_T_DOUBLE || p->type == CFG_T_SECONDS) && p->choices && v->kind == CFG_SCALAR)
        for (int k = 0; p->choices[k]; k++)
            if (!strcmp(p->choices[k], v->str)) {
                *(double *)field = NAN;
                return ERR_OK;
            }
    switch (p->type) {
    case CFG_T_DOUBLE: rc = cfg_double(v, &d, e); break;
    case CFG_T_BYTES: rc = cfg_bytes(v, &d, e); break;
    case CFG_T_SECONDS: rc = cfg_seconds(v, &d, e); break;
    case CFG_T_INT: rc = cfg_int64(v, &i, e); d = (double)i; break;
    case CFG_T_BOOL: return cfg_bool(v, (bool *)field, e);
    case CFG_T_STRING:
        if (v->kind != CFG_SCALAR) return cfg_error(e, ERR_INVAL, v, "expected text, got a %s", v->kind == CFG_MAP ? "map" : "list");
        *(const char **)field = v->str;
        return ERR_OK;
    case CFG_T_ENUM:
        if (v->kind == CFG_SCALAR)
            for (int k = 0; p->choices[k]; k++)
                if (!strcmp(p->choices[k], v->str)) { *(int *)field = k; return ERR_OK; }
        {
            char list[512] = "";
            for (int k = 0; p->choices[k]; k++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", p->choices[k]);
            return cfg_error(e, ERR_INVAL, v, "expected one of %s, got '%s'", list, v->kind == CFG_SCALAR ? v->str : "a collection");
        }
    case CFG_T_NODE: *(const cfg_node_t **)field = v; return ERR_OK;
    }
    if (rc) return rc;
    if (p->min <= p->max && (d < p->min || d > p->max))
        return cfg_error(e, ERR_RANGE, v, "%s is outside [%g, %g]", v->str, p->min, p->max);
    if (p->type == CFG_T_INT) *(int64_t *)field = i;
    else *(double *)field = d;
    return ERR_OK;
}

static int bind_default(const cfg_node_t *map, const cfg_param_t *p, void *field, err_t *e)
{
    if (p->type == CFG_T_NODE && !p->dflt) {
        *(const cfg_node_t **)field = NULL;
        return ERR_OK;
    }
    if (!p->dflt) {
        if (map) return cfg_error(e, ERR_INVAL, map, "missing required key '%s' (%s)", p->key, p->doc ? p->doc : "");
        return err_set(e, ERR_INVAL, "missing required key '%s' (%s)", p->key, p->doc ? p->doc : "");
    }
    if (p->type == CFG_T_STRING) {
        *(const char **)field = p->dflt;
        return ERR_OK;
    }
    cfg_node_t tmp = {.kind = CFG_SCALAR, .str = (char *)p->dflt, .file = (char *)"<default>",
                      .path = (char *)p->key, .line = 0, .col = 0};
    return bind_scalar(&tmp, p, field, e);
}

int cfg_bind(const cfg_node_t *map, const cfg_param_t *params, size_t n, void *obj, err_t *e)
{
    if (map && map->kind != CFG_MAP) return cfg_error(e, ERR_INVAL, map, "expected a map of settings");
    for (size_t i = 0; i < n; i++) {
        const cfg_param_t *p = &params[i];
        void *field = (char *)obj + p->offset;
        cfg_node_t *v = map ? cfg_get(map, p->key) : NULL;
        int rc = v ? bind_scalar(v, p, field, e) : bind_default(map, p, field, e);
        if (rc) return rc;
    }
    if (!map) return ERR_OK;
    for (size_t j = 0; j < map->n; j++) {
        bool known = false;
        const char *best = NULL;
        size_t best_d = (size_t)-1;
        for (size_t i = 0; i < n && !known; i++) {
            known = !strcmp(params[i].key, map->keys[j]);
            size_t d = edit_distance(params[i].key, map->keys[j]);
            if (d < best_d) { best_d = d; best = params[i].key; }
        }
        if (known) continue;
        if (best && best_d <= 3)
            return cfg_error(e, ERR_INVAL, map->vals[j], "unknown key '%s' (did you mean '%s'?)", map->keys[j], best);
        return cfg_error(e, ERR_INVAL, map->vals[j], "unknown key '%s'", map->keys[j]);
    }
    return ERR_OK;
}

int cfg_check_consumed(const cfg_node_t *map, err_t *e)
{
    if (!map || map->kind != CFG_MAP) return ERR_OK;
    for (size_t j = 0; j < map->n; j++)
        if (!map->vals[j]->consumed) return cfg_error(e, ERR_INVAL, map->vals[j], "unknown key '%s'", map->keys[j]);
    return ERR_OK;
}

static cfg_params_receiver describe_fn;
static void *describe_arg;

void cfg_params_receive(cfg_params_receiver fn, void *arg)
{
    describe_fn = fn;
    describe_arg = arg;
}

static const char *const tname[] = {"number", "integer", "bool", "text", "choice", "bytes", "seconds", "map"};

const char *cfg_type_name(cfg_type_t t) { return (unsigned)t < sizeof tname / sizeof *tname ? tname[t] : "?"; }

void cfg_params_describe(FILE *fp, const char *section, const cfg_param_t *params, size_t n)
{
    if (describe_fn) {
        describe_fn(describe_arg, section, params, n);
        return;
    }
    fprintf(fp, "%s:\n", section);
    for (size_t i = 0; i < n; i++) {
        const cfg_param_t *p = &params[i];
        const char *dflt = p->dflt ? p->dflt : p->type == CFG_T_NODE ? "(section)" : "(required)";
        fprintf(fp, "  %-24s %-8s default %-12s", p->key, tname[p->type], dflt);
        if (p->min <= p->max && p->type != CFG_T_ENUM) fprintf(fp, " [%g, %g]", p->min, p->max);
        for (int k = 0; p->type != CFG_T_ENUM && p->choices && p->choices[k]; k++) fprintf(fp, " or %s", p->choices[k]);
        if (p->type == CFG_T_ENUM) {
            fputs(" {", fp);
            for (int k = 0; p->choices[k]; k++) fprintf(fp, "%s%s", k ? "|" : "", p->choices[k]);
            fputc('}', fp);
        }
        fprintf(fp, "  %s\n", p->doc ? p->doc : "");
    }
}

/* ---- writing -------------------------------------------------------------------------------- */

static bool needs_quotes(const char *s)
{
    if (!*s) return true;
    if (strchr(":#{}[],&*!|>'\"%@`\n\t", s[0]) || s[0] == '-' || s[0] == ' ' || s[0] == '?') {
        /* a leading '-' is fine for numbers */
        char *end;
        strtod(s, &end);
        if (s[0] == '-' && end != s && !*end) return false;
        return true;
    }
    for (const char *c = s; *c; c++)
        if (*c == '\n' || *c == '\t' || *c == '"' || (*c == ':' && (c[1] == ' ' || !c[1])) || (*c == ' ' && c[1] == '#'))
            return true;
    return s[strlen(s) - 1] == ' ';
}

static void emit_scalar(const cfg_node_t *n, FILE *fp)
{
    if (!n->quoted && !needs_quotes(n->str)) {
        fputs(n->str, fp);
        return;
    }
    fputc('"', fp);
    for (const char *c = n->str; *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(fp, "\\%c", *c);
        else if (*c == '\n') fputs("\\n", fp);
        else if (*c == '\t') fputs("\\t", fp);
        else if ((unsigned char)*c < 0x20) fprintf(fp, "\\x%02x", (unsigned char)*c);
        else fputc(*c, fp);
    }
    fputc('"', fp);
}

static void emit_key(const char *k, FILE *fp)
{
    cfg_node_t tmp = {.kind = CFG_SCALAR, .str = (char *)k};
    emit_scalar(&tmp, fp);
}

void cfg_emit(const cfg_node_t *n, FILE *fp, int indent)
{
    if (n->kind == CFG_SCALAR) {
        fprintf(fp, "%*s", indent, "");
        emit_scalar(n, fp);
        fputc('\n', fp);
        return;
    }
    if (n->n == 0) {
        fprintf(fp, "%*s%s\n", indent, "", n->kind == CFG_MAP ? "{}" : "[]");
        return;
    }
    for (size_t i = 0; i < n->n; i++) {
        const cfg_node_t *v = n->vals[i];
        fprintf(fp, "%*s", indent, "");
        if (n->kind == CFG_MAP) {
            emit_key(n->keys[i], fp);
            fputc(':', fp);
        } else {
            fputc('-', fp);
        }
        if (v->kind == CFG_SCALAR) {
            fputc(' ', fp);
            emit_scalar(v, fp);
            fputc('\n', fp);
        } else if (v->n == 0) {
            fprintf(fp, " %s\n", v->kind == CFG_MAP ? "{}" : "[]");
        } else {
            fputc('\n', fp);
            cfg_emit(v, fp, indent + 2);
        }
    }
}
