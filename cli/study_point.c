/* Resolving a sweep point: bind every section, look up the presets, check the method. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/study_class.h"
#include "cli/study_int.h"
#include "common/str.h"

char *study_catalog_file(const study_t *s, const char *file)
{
    const cfg_node_t *node = cfg_get(cfg_root(s->doc), "catalog");
    const char *cat = node ? cfg_str(node) : NULL;
    char *dir = study_path(s, cat ? cat : STUDY_DEFAULT_CATALOG);
    size_t n = dir ? strlen(dir) + strlen(file) + 2 : 0;
    char *p = n ? malloc(n) : NULL;
    if (p) snprintf(p, n, "%s%s%s", dir, *file ? "/" : "", file);
    free(dir);
    return p;
}

int study_catalogs_load(study_t *s, err_t *e)
{
    char *dir = study_catalog_file(s, "");
    char *llms = study_catalog_file(s, "llms.yaml");
    int rc = (dir && llms) ? hwcat_load(dir, &s->hwcat, e) : err_set(e, ERR_NOMEM, "out of memory");
    if (!rc) rc = llmcat_load(llms, &s->llmcat, e);
    free(dir);
    free(llms);
    return rc;
}

void study_catalogs_free(study_t *s)
{
    hwcat_free(s->hwcat);
    llmcat_free(s->llmcat);
    s->hwcat = NULL;
    s->llmcat = NULL;
}

void study_point_free(study_point_t *pt)
{
    method_free(pt->method);
    free(pt->classes);
    free(pt->class_mcfg);
    llm_free(&pt->llm);
    hw_free(&pt->hw);
    free(pt->calib_path);
    uplan_free(pt->uplan);
    cfg_free(pt->doc);
    memset(pt, 0, sizeof *pt);
}

static int bind_sections(study_point_t *pt, err_t *e)
{
    int rc = scn_bind_top(cfg_root(pt->doc), &pt->top, e);
    if (!rc) rc = scn_bind_model(pt->top.model, &pt->model, e);
    if (!rc) rc = scn_bind_serving(pt->top.serving, &pt->serving, e);
    if (!rc) rc = scn_bind_workload(pt->top.workload, &pt->wl, e);
    if (!rc) rc = scn_bind_slo(pt->top.slo, &pt->slo, e);
    if (!rc) rc = scn_bind_run(pt->top.run, &pt->run, e);
    if (!rc && pt->wl.kind == SCN_WL_PROBE) rc = scn_bind_probe(pt->wl.probe, &pt->probe, e);
    if (!rc && !pt->top.hardware) rc = err_set(e, ERR_INVAL, "%s: missing required section 'hardware'", cfg_file(cfg_root(pt->doc)));
    if (!rc && !pt->top.method) rc = err_set(e, ERR_INVAL, "%s: missing required section 'method'", cfg_file(cfg_root(pt->doc)));
    return rc;
}

/* A measured op or layer step is one layer of the model, with the row's KV heads; a session step
 * (kbench's concurrency suite) is the whole model, LM head included. */
static void probe_shape(const scn_probe_t *pb, llm_t *m)
{
    int group = m->q_heads / m->kv_heads;
    m->layers = 1;
    if (pb->heads > 0) {
        m->kv_heads = (int)pb->heads;
        m->q_heads = (int)pb->heads * group;
    }
}

/* The point's session classes and their own methods' configurations: a class's method keeps the
 * scenario's weights and tier, which the box's memory is laid out for. */
static int bind_classes(study_point_t *pt, err_t *e)
{
    int rc = scn_bind_classes(pt->top.classes, &pt->wl, &pt->classes, &pt->n_classes, e);
    if (rc || !pt->n_classes) return rc;
    if (!(pt->class_mcfg = calloc(pt->n_classes, sizeof *pt->class_mcfg))) return err_set(e, ERR_NOMEM, "out of memory");
    for (size_t c = 0; !rc && c < pt->n_classes; c++) {
        const cfg_node_t *m = pt->classes[c].method;
        if (!m) continue;
        method_cfg_t *mc = &pt->class_mcfg[c];
        rc = method_cfg_bind(m, mc, e);
        if (!rc && mc->weight_dtype != pt->mcfg.weight_dtype)
            rc = cfg_error(e, ERR_INVAL, m, "a class's weights_dtype must be the scenario method's (the weights are loaded once)");
        if (!rc && mc->tier != pt->mcfg.tier)
            rc = cfg_error(e, ERR_INVAL, m, "a class's tier must be the scenario method's (host-side data goes to one pool)");
        if (!rc && mc->plan[0])
            rc = cfg_error(e, ERR_INVAL, cfg_get(m, "plan"), "a class's method takes no plan (a user plan applies to the scenario's method)");
    }
    return rc;
}

/* method.plan: the file beside the scenario that names it, else as other data files are found; a
 * whole plan runs as method dense, its map holding nothing else. */
static int load_user_plan(study_t *s, study_point_t *pt, err_t *e)
{
    const cfg_node_t *m = pt->top.method, *node = cfg_get(m, "plan");
    const char *rel = pt->mcfg.plan, *file = cfg_file(node), *slash = strrchr(file, '/');
    char *path = NULL;
    if (rel[0] != '/' && slash) {
        size_t n = (size_t)(slash - file) + strlen(rel) + 2;
        path = malloc(n);
        if (path) snprintf(path, n, "%.*s/%s", (int)(slash - file), file, rel);
        if (path && access(path, R_OK)) {
            free(path);
            path = NULL;
        }
    }
    if (!path) path = study_path(s, rel);
    int rc = path ? uplan_load(path, &pt->uplan, e) : err_set(e, ERR_NOMEM, "out of memory");
    free(path);
    if (rc) {
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        return cfg_error(e, rc, node, "%s", msg);
    }
    if (!pt->uplan->whole) return ERR_OK;
    for (size_t i = 0; i < cfg_size(m); i++) {
        const char *k = cfg_key_at(m, i);
        if (!strcmp(k, "plan") || (!strcmp(k, "method") && !strcmp(cfg_str(cfg_at(m, i)) ? cfg_str(cfg_at(m, i)) : "", "dense")))
            continue;
        return cfg_error(e, ERR_INVAL, cfg_at(m, i), "plan %s is a whole plan: it runs as method dense, with no other method key",
                         pt->uplan->file);
    }
    return ERR_OK;
}

/* Point i up to its method's configuration: bound, presets looked up, pt->method not built. */
static int resolve_bound(study_t *s, size_t i, study_point_t *pt, err_t *e)
{
    memset(pt, 0, sizeof *pt);
    int rc = study_point_doc(s, i, false, &pt->doc, e);
    if (!rc) rc = bind_sections(pt, e);
    if (!rc) rc = hw_resolve_node(s->hwcat, pt->top.hardware, &pt->hw, e);
    if (!rc) rc = llm_get(s->llmcat, pt->model.name, pt->model.set, &pt->llm, e);
    if (!rc && pt->wl.kind == SCN_WL_PROBE && pt->probe.what != SCN_PROBE_SESSION_STEP &&
        pt->probe.what != SCN_PROBE_PREFILL_CHUNK)
        probe_shape(&pt->probe, &pt->llm);
    if (!rc) rc = method_cfg_bind(pt->top.method, &pt->mcfg, e);
    if (!rc) rc = bind_classes(pt, e);
    if (!rc && pt->mcfg.plan[0]) rc = load_user_plan(s, pt, e);
    if (!rc && strcmp(pt->top.calibration, "none")) {
        pt->calib_path = study_path(s, pt->top.calibration);
        if (!pt->calib_path) rc = err_set(e, ERR_NOMEM, "out of memory");
    }
    return rc;
}

static int build_method(study_t *s, study_point_t *pt, err_t *e)
{
    s->methods_built++;
    return method_new(&pt->mcfg, &pt->llm, &pt->method, e);
}

int study_point_resolve(study_t *s, size_t i, study_point_t *pt, err_t *e)
{
    int rc = resolve_bound(s, i, pt, e);
    if (!rc) rc = build_method(s, pt, e);
    if (rc) study_point_free(pt);
    return rc;
}

/* What a point's method is built from: its method, model and probe sections as text (hashed). */
static uint64_t method_key(const study_point_t *pt)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) return 0;
    const cfg_node_t *parts[] = {pt->top.method, pt->top.model, pt->wl.kind == SCN_WL_PROBE ? pt->wl.probe : NULL,
                                 pt->top.classes};
    for (size_t j = 0; j < sizeof parts / sizeof *parts; j++) {
        fputs("\n--\n", mem);
        if (parts[j]) cfg_emit(parts[j], mem, 0);
    }
    fclose(mem);
    uint64_t h = str_fnv1a(buf, len);
    free(buf);
    return h | 1; /* 0 marks an empty slot */
}

/* Adds key to the open-addressed set (n_slots a power of two); false when it was there. */
static bool key_insert(uint64_t *slots, size_t n_slots, uint64_t key)
{
    for (size_t j = key & (n_slots - 1);; j = (j + 1) & (n_slots - 1)) {
        if (slots[j] == key) return false;
        if (!slots[j]) {
            slots[j] = key;
            return true;
        }
    }
}

int study_points_check(study_t *s, err_t *e)
{
    size_t n_checks = 1;
    for (size_t a = 0; a < s->n_axes; a++) n_checks += s->axes[a].n;
    size_t n_slots = 2;
    while (n_slots < 2 * n_checks) n_slots *= 2;
    uint64_t *seen = calloc(n_slots, sizeof *seen);
    if (!seen) return err_set(e, ERR_NOMEM, "out of memory");
    int rc = ERR_OK;
    /* Point 0, then each axis's other values: value j of axis a is point j times the points of the
     * axes after it (which vary faster). */
    for (size_t a = 0, stride = s->n_points; !rc && a <= s->n_axes; a++) {
        size_t from = a ? 1 : 0, to = a ? s->axes[a - 1].n : 1;
        if (a) stride /= s->axes[a - 1].n;
        for (size_t j = from; !rc && j < to; j++) {
            size_t i = j * stride;
            study_point_t pt;
            rc = resolve_bound(s, i, &pt, e);
            if (!rc && key_insert(seen, n_slots, method_key(&pt))) rc = build_method(s, &pt, e);
            if (!rc && pt.n_classes && pt.method) rc = study_classes_check(&pt, e);
            study_point_free(&pt);
            if (rc && s->n_points > 1) err_prefix(e, "sweep point %zu (%s)", i, s->labels[i]);
        }
    }
    free(seen);
    return rc;
}
