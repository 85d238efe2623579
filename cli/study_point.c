/* Resolving a sweep point: bind every section, look up the presets, check the method. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/study_int.h"

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
    llm_free(&pt->llm);
    hw_free(&pt->hw);
    free(pt->calib_path);
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

int study_point_resolve(study_t *s, size_t i, study_point_t *pt, err_t *e)
{
    memset(pt, 0, sizeof *pt);
    int rc = study_point_doc(s, i, &pt->doc, e);
    if (!rc) rc = bind_sections(pt, e);
    if (!rc) rc = hw_resolve_node(s->hwcat, pt->top.hardware, &pt->hw, e);
    if (!rc) rc = llm_get(s->llmcat, pt->model.name, pt->model.set, &pt->llm, e);
    if (!rc && pt->wl.kind == SCN_WL_PROBE && pt->probe.what != SCN_PROBE_SESSION_STEP &&
        pt->probe.what != SCN_PROBE_PREFILL_CHUNK)
        probe_shape(&pt->probe, &pt->llm);
    if (!rc) rc = method_cfg_bind(pt->top.method, &pt->mcfg, e);
    if (!rc) rc = method_new(&pt->mcfg, &pt->llm, &pt->method, e);
    if (!rc && strcmp(pt->top.calibration, "none")) {
        pt->calib_path = study_path(s, pt->top.calibration);
        if (!pt->calib_path) rc = err_set(e, ERR_NOMEM, "out of memory");
    }
    if (rc) study_point_free(pt);
    return rc;
}
