#include "validation/vflags.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>


typedef struct vflag {
    char name[96];
    bool assumed;        /* the assumed row, else the out-of-range row */
    bool clamps;
    size_t cases, flagged;
} vflag_t;

typedef struct vflags {
    vflag_t *v;
    size_t n;
    size_t n_flagged, n_ok;
} vflags_t;

/* The row of name and kind (added when new); NULL when out of memory. */
static vflag_t *row_of(vflags_t *f, const char *name, bool assumed)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i].assumed == assumed && !strcmp(f->v[i].name, name)) return &f->v[i];
    vflag_t *nv = realloc(f->v, (f->n + 1) * sizeof *nv);
    if (!nv) return NULL;
    f->v = nv;
    vflag_t *r = &nv[f->n++];
    *r = (vflag_t){.assumed = assumed};
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

/* Whether name is one of the comma-separated list. */
static bool listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && !strncmp(p, name, n)) return true;
        p += n + (p[n] == ',');
    }
    return false;
}

/* Out of memory: what was counted so far. */
static void collect(const cmp_t *c, vflags_t *f)
{
    *f = (vflags_t){0};
    for (size_t i = 0; i < cmp_n_cases(c); i++) {
        const cmp_case_t *cs = cmp_case_at(c, i);
        if (!cs->ok) continue;
        f->n_ok++;
        f->n_flagged += cs->flagged;
        for (const char *p = cs->flags; *p;) {
            size_t n = strcspn(p, "\n");
            char line[512], name[96] = "";
            snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
            p += n + (p[n] == '\n');
            if (sscanf(line, " %95s", name) != 1) continue;
            vflag_t *r;
            if (strstr(line, " outside its range")) {
                if (!(r = row_of(f, name, false))) return;
                r->cases++;
                r->clamps = r->clamps || listed(cs->clamped, name);
                r->flagged += cs->flagged && listed(cs->flagged_by, name);
            }
            if (strstr(line, " assumed")) {
                if (!(r = row_of(f, name, true))) return;
                r->cases++;
            }
        }
    }
}

void vflags_text(FILE *fp, const cmp_t *c)
{
    vflags_t f;
    collect(c, &f);
    fprintf(fp, "\n[flagged]: %zu of %zu predicted cases: clamping the calibration parameters they used outside their\n"
                "fitted range into it moves a predicted p50, p99 or throughput by more than %g%% (docs/calibration.md).\n",
            f.n_flagged, f.n_ok, CMP_FLAG_PCT);
    bool any = false;
    for (size_t i = 0; i < f.n; i++) {
        const vflag_t *r = &f.v[i];
        if (r->assumed) continue;
        if (!any) fprintf(fp, "%-36s %-28s %8s %8s\n", "used outside its fitted range", "its cost term", "cases", "flags");
        any = true;
        fprintf(fp, "  %-34s %-28s %8zu %8zu\n", r->name, r->clamps ? "clamps" : "flat in its predictor", r->cases,
                r->flagged);
    }
    any = false;
    for (size_t i = 0; i < f.n; i++) {
        const vflag_t *r = &f.v[i];
        if (!r->assumed) continue;
        if (!any) fprintf(fp, "assumed (no fitted range to clamp into: never flags; `odsim plan` gives its elasticity):\n");
        any = true;
        fprintf(fp, "  %-34s %-28s %8zu\n", r->name, "", r->cases);
    }
    free(f.v);
}

json_t *vflags_json(const cmp_t *c)
{
    vflags_t f;
    collect(c, &f);
    json_t *out = json_array(), *as = json_array();
    for (size_t i = 0; out && as && i < f.n; i++) {
        const vflag_t *r = &f.v[i];
        if (r->assumed) json_array_append_new(as, json_pack("{s:s,s:I}", "name", r->name, "cases", (json_int_t)r->cases));
        else
            json_array_append_new(out, json_pack("{s:s,s:b,s:I,s:I}", "name", r->name, "clamps", r->clamps, "cases",
                                                  (json_int_t)r->cases, "flagged", (json_int_t)r->flagged));
    }
    free(f.v);
    if (!out || !as) {
        json_decref(out);
        json_decref(as);
        return NULL;
    }
    return json_pack("{s:I,s:I,s:f,s:o,s:o}", "flagged", (json_int_t)f.n_flagged, "of", (json_int_t)f.n_ok, "threshold_pct",
                     CMP_FLAG_PCT, "outside", out, "assumed", as);
}
