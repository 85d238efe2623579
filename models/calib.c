#include "models/calib.h"
#include "common/str.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common/atomicio.h"
#include "common/cfg.h"
#include "models/cost_params.h"

typedef struct centry {
    calib_param_t p;   /* strings owned */
    uint64_t uses, outside;
    double x_min, x_max;
    bool clamp;        /* calib_clamp: its uses are evaluated at its predictor clamped into [lo, hi] */
    bool clamps;       /* a cost form read its predictor through calib_x (clamping can move it) */
} centry_t;

/* Notes come from every op a cost form builds, with the same few names (mostly literals): a slot per
 * name pointer remembers its entry (or that there is none), checked against a copy of the name. */
#define NOTE_SLOTS 128
#define NOTE_NAME_MAX 48

typedef struct note_slot {
    const char *ptr;   /* NULL: empty */
    long idx;          /* the entry, or -1 for none */
    char name[NOTE_NAME_MAX];
} note_slot_t;

struct calib {
    centry_t *v;       /* sorted by name */
    size_t n;
    uint64_t hash;
    char *profile;     /* the profile's name, NULL when none */
    calib_platform_t platform; /* strings owned; all NULL when undeclared */
    note_slot_t note[NOTE_SLOTS];  /* emptied when an entry is inserted (indices move) */
};

static void entry_clear(centry_t *en)
{
    free((char *)en->p.name);
    free((char *)en->p.unit);
    free((char *)en->p.origin);
}

int calib_new(calib_t **out, err_t *e)
{
    *out = calloc(1, sizeof **out);
    return *out ? ERR_OK : err_set(e, ERR_NOMEM, "calib: out of memory");
}

static void platform_clear(calib_platform_t *p)
{
    free((char *)p->gpu);
    free((char *)p->link);
    free((char *)p->host);
    free((char *)p->virtualisation);
    memset(p, 0, sizeof *p);
}

void calib_free(calib_t *c)
{
    if (!c) return;
    free(c->profile);
    platform_clear(&c->platform);
    for (size_t i = 0; i < c->n; i++) entry_clear(&c->v[i]);
    free(c->v);
    free(c);
}

/* Binary search: cost forms note their parameters on every op they build. */
static centry_t *entry_find(const calib_t *c, const char *name)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(c->v[mid].p.name, name);
        if (!d) return &c->v[mid];
        if (d < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

int calib_set(calib_t *c, const calib_param_t *p, err_t *e)
{
    const char *unit = hwcat_param_unit(p->name);
    if (!unit || hwcat_param_is_text(p->name))
        return err_set(e, ERR_INVAL, "calib: unknown parameter '%s'", p->name);
    centry_t ne = {.p = *p, .x_min = NAN, .x_max = NAN};
    ne.p.name = str_dup((p->name) ? (p->name) : "");
    ne.p.unit = str_dup((unit) ? (unit) : "");
    ne.p.origin = str_dup((p->origin) ? (p->origin) : "");
    if (!ne.p.name || !ne.p.unit || !ne.p.origin) {
        entry_clear(&ne);
        return err_set(e, ERR_NOMEM, "calib: out of memory");
    }
    centry_t *old = entry_find(c, p->name);
    if (old) {
        entry_clear(old);
        *old = ne;
        return ERR_OK;
    }
    centry_t *nv = realloc(c->v, (c->n + 1) * sizeof *nv);
    if (!nv) {
        entry_clear(&ne);
        return err_set(e, ERR_NOMEM, "calib: out of memory");
    }
    c->v = nv;
    size_t at = c->n;
    while (at > 0 && strcmp(c->v[at - 1].p.name, ne.p.name) > 0) {
        c->v[at] = c->v[at - 1];
        at--;
    }
    c->v[at] = ne;
    c->n++;
    for (size_t i = 0; i < NOTE_SLOTS; i++) c->note[i].ptr = NULL;
    return ERR_OK;
}

typedef struct cnode {
    double value, sd, lo, hi;
    const char *unit, *origin;
} cnode_t;

static const cfg_param_t cnode_params[] = {
    {"value", CFG_T_DOUBLE, offsetof(cnode_t, value), NULL, 1, 0, NULL, "the value, in the unit of the name"},
    {"stderr", CFG_T_DOUBLE, offsetof(cnode_t, sd), "0", 0, 1e300, NULL, "standard error of the fit"},
    {"lo", CFG_T_DOUBLE, offsetof(cnode_t, lo), "0", 1, 0, NULL, "predictor range, low end"},
    {"hi", CFG_T_DOUBLE, offsetof(cnode_t, hi), "-1", 1, 0, NULL, "predictor range, high end"},
    {"unit", CFG_T_STRING, offsetof(cnode_t, unit), "", 1, 0, NULL, "unit (must match the name's)"},
    {"origin", CFG_T_STRING, offsetof(cnode_t, origin), NULL, 1, 0, NULL, "fitted CSV, measured, or assumed"},
};

/* The platform a profile was measured on: preset names of the catalogs, and the host's virtualisation. */
typedef struct cplatform {
    const char *gpu, *link, *host, *virtualisation;
} cplatform_t;

static const cfg_param_t cplatform_params[] = {
    {"gpu", CFG_T_STRING, offsetof(cplatform_t, gpu), NULL, 1, 0, NULL, "GPU preset measured (gpus.yaml)"},
    {"link", CFG_T_STRING, offsetof(cplatform_t, link), NULL, 1, 0, NULL, "host link preset measured (links.yaml)"},
    {"host", CFG_T_STRING, offsetof(cplatform_t, host), NULL, 1, 0, NULL, "box preset of the measured host (boxes.yaml)"},
    {"virtualisation", CFG_T_STRING, offsetof(cplatform_t, virtualisation), "", 1, 0, NULL,
     "bare metal, or the VM the measurements ran in"},
};

typedef struct cprofile {
    const char *profile, *hardware;
    const cfg_node_t *platform;
    const cfg_node_t *params;
    const cfg_node_t *sources, *residuals, *notes; /* provenance kept in the file, not used here */
} cprofile_t;

static const cfg_param_t cprofile_params[] = {
    {"profile", CFG_T_STRING, offsetof(cprofile_t, profile), "", 1, 0, NULL, "profile name"},
    {"hardware", CFG_T_STRING, offsetof(cprofile_t, hardware), "", 1, 0, NULL, "what it was measured on (free text)"},
    {"platform", CFG_T_NODE, offsetof(cprofile_t, platform), NULL, 1, 0, NULL,
     "what it was measured on, as catalog presets: {gpu, link, host, virtualisation}"},
    {"params", CFG_T_NODE, offsetof(cprofile_t, params), NULL, 1, 0, NULL, "map of name to parameter"},
    {"sources", CFG_T_NODE, offsetof(cprofile_t, sources), NULL, 1, 0, NULL, "fit provenance: files, hashes, device (odsim fit)"},
    {"residuals", CFG_T_NODE, offsetof(cprofile_t, residuals), NULL, 1, 0, NULL, "fit residuals per group (odsim fit)"},
    {"notes", CFG_T_NODE, offsetof(cprofile_t, notes), NULL, 1, 0, NULL, "what the fit could not determine (odsim fit)"},
};

/* One parameter, key (its name in the profile: a curve's point label) → name. */
static int load_param(calib_t *c, const char *key, const char *name, const cfg_node_t *v, err_t *e)
{
    const char *unit = hwcat_param_unit(name);
    if (!unit || hwcat_param_is_text(name)) return cfg_error(e, ERR_INVAL, v, "unknown calibration parameter '%s'", key);
    cnode_t cn;
    int rc = cfg_bind(v, cnode_params, sizeof cnode_params / sizeof cnode_params[0], &cn, e);
    if (rc) return rc;
    if (*cn.unit && strcmp(cn.unit, unit))
        return cfg_error(e, ERR_INVAL, cfg_get(v, "unit"), "unit '%s' is not the unit of %s ('%s')", cn.unit, name, unit);
    calib_param_t p = {name, cn.value, cn.sd, cn.lo, cn.hi, unit, cn.origin};
    return calib_set(c, &p, e);
}

typedef struct ccurve {
    const char *unit;
    const cfg_node_t *points;
} ccurve_t;

static const cfg_param_t ccurve_params[] = {
    {"unit", CFG_T_STRING, offsetof(ccurve_t, unit), "", 1, 0, NULL, "unit of every point (must match the curve's)"},
    {"points", CFG_T_NODE, offsetof(ccurve_t, points), NULL, 1, 0, NULL, "map of knot (its region: 256MiB, ...) to parameter"},
};

/* A curve: {unit, points: {label: {value, ...}}}, each point the knot parameter of its label. */
static int load_curve(calib_t *c, const cost_curve_t *cv, const char *name, const cfg_node_t *v, err_t *e)
{
    ccurve_t cc;
    int rc = cfg_bind(v, ccurve_params, sizeof ccurve_params / sizeof ccurve_params[0], &cc, e);
    if (rc) return rc;
    if (cfg_kind(cc.points) != CFG_MAP) return cfg_error(e, ERR_INVAL, cc.points, "expected a map of knot to parameter");
    const char *unit = hwcat_param_unit(cv->knots[0]);
    if (*cc.unit && strcmp(cc.unit, unit))
        return cfg_error(e, ERR_INVAL, cfg_get(v, "unit"), "unit '%s' is not the unit of %s ('%s')", cc.unit, name, unit);
    for (size_t i = 0; i < cfg_size(cc.points); i++) {
        const char *label = cfg_key_at(cc.points, i);
        int k = cost_curve_knot(cv, label);
        if (k < 0) {
            char known[512] = "";
            for (int j = 0; j < cv->n_knots; j++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "", cv->knots[j] + strlen(cv->prefix));
            return cfg_error(e, ERR_INVAL, cfg_at(cc.points, i), "%s has no knot '%s' (its knots: %s)", name, label, known);
        }
        rc = load_param(c, label, cv->knots[k], cfg_at(cc.points, i), e);
        if (rc) return rc;
    }
    return ERR_OK;
}

static int load_doc(calib_t *c, const cfg_doc_t *doc, err_t *e)
{
    cprofile_t pr;
    int rc = cfg_bind(cfg_root(doc), cprofile_params, sizeof cprofile_params / sizeof cprofile_params[0], &pr, e);
    if (rc) return rc;
    if (pr.platform) {
        cplatform_t pl;
        rc = cfg_bind(pr.platform, cplatform_params, sizeof cplatform_params / sizeof cplatform_params[0], &pl, e);
        if (rc) return rc;
        c->platform = (calib_platform_t){str_dup(pl.gpu), str_dup(pl.link), str_dup(pl.host), str_dup(pl.virtualisation)};
        if (!c->platform.gpu || !c->platform.link || !c->platform.host || !c->platform.virtualisation)
            return err_set(e, ERR_NOMEM, "calib: out of memory");
    }
    if (*pr.profile && !(c->profile = str_dup(pr.profile))) return err_set(e, ERR_NOMEM, "calib: out of memory");
    if (!pr.params) return ERR_OK;
    if (cfg_kind(pr.params) != CFG_MAP) return cfg_error(e, ERR_INVAL, pr.params, "expected a map of parameters");
    for (size_t i = 0; i < cfg_size(pr.params); i++) {
        const char *name = cfg_key_at(pr.params, i);
        const cfg_node_t *v = cfg_at(pr.params, i);
        const cost_curve_t *cv = cost_curve_find(name);
        int knot;
        if (cv) rc = load_curve(c, cv, name, v, e);
        else if ((cv = cost_curve_of(name, &knot)))
            rc = cfg_error(e, ERR_INVAL, v, "a point of the curve %.*s: write it as %.*s: {points: {%s: {...}}}",
                           (int)strlen(cv->prefix) - 1, cv->prefix, (int)strlen(cv->prefix) - 1, cv->prefix,
                           name + strlen(cv->prefix));
        else rc = load_param(c, name, name, v, e);
        if (rc) return rc;
    }
    return ERR_OK;
}

/* A profile from len bytes of text (NUL bytes included: the YAML reader rejects them). */
static int load_text(const char *name, const char *text, size_t len, calib_t **out, err_t *e)
{
    cfg_doc_t *doc = NULL;
    int rc = calib_new(out, e);
    if (!rc) rc = cfg_parse_string(name, text, len, &doc, e);
    if (!rc) rc = load_doc(*out, doc, e);
    cfg_free(doc);
    if (rc) {
        calib_free(*out);
        *out = NULL;
        return rc;
    }
    (*out)->hash = str_fnv1a(text, len);
    return ERR_OK;
}

int calib_load_string(const char *name, const char *text, calib_t **out, err_t *e)
{
    return load_text(name, text, strlen(text), out, e);
}

int calib_load(const char *path, calib_t **out, err_t *e)
{
    char *buf;
    size_t len;
    /* bounded as every YAML file is (a profile on /dev/zero once read without end) */
    int rc = atomicio_read_all(path, CFG_MAX_FILE_BYTES, &buf, &len, e);
    if (rc) return rc;
    rc = load_text(path, buf, len, out, e);
    free(buf);
    return rc;
}

int calib_seed(calib_t *c, const hw_t *hw, err_t *e)
{
    for (size_t i = 0; i < hw->params.n; i++) {
        const hw_param_t *hp = &hw->params.p[i];
        if (hp->text || entry_find(c, hp->key)) continue;
        calib_param_t p = {hp->key, hp->value, hp->stderr_v, hp->lo, hp->hi, hp->unit, hp->origin};
        int rc = calib_set(c, &p, e);
        if (rc) return rc;
    }
    return ERR_OK;
}

const calib_param_t *calib_find(const calib_t *c, const char *name)
{
    const centry_t *en = entry_find(c, name);
    return en ? &en->p : NULL;
}

int calib_get(const calib_t *c, const char *name, double *out, err_t *e)
{
    const centry_t *en = entry_find(c, name);
    if (!en) return err_set(e, ERR_NOTFOUND, "calib: no parameter '%s' in the profile or the hardware preset", name);
    *out = en->p.value;
    return ERR_OK;
}

static bool is_assumed(const char *origin) { return !strncmp(origin, "assumed", 7); }

/* entry_find through the note slots. */
static centry_t *note_find(calib_t *c, const char *name)
{
    uintptr_t h = (uintptr_t)name;
    note_slot_t *s = &c->note[(h ^ (h >> 7) ^ (h >> 14)) % NOTE_SLOTS];
    if (s->ptr == name && !strcmp(s->name, name)) return s->idx >= 0 ? &c->v[s->idx] : NULL;
    centry_t *en = entry_find(c, name);
    size_t len = strlen(name);
    if (len < NOTE_NAME_MAX) {
        s->ptr = name;
        s->idx = en ? (long)(en - c->v) : -1;
        memcpy(s->name, name, len + 1);
    }
    return en;
}

void calib_note(calib_t *c, const char *name, double x)
{
    centry_t *en = c ? note_find(c, name) : NULL;
    if (!en) return;
    en->uses++;
    if (isnan(x)) return;
    if (isnan(en->x_min) || x < en->x_min) en->x_min = x;
    if (isnan(en->x_max) || x > en->x_max) en->x_max = x;
    if (en->p.lo <= en->p.hi && (x < en->p.lo || x > en->p.hi)) en->outside++;
}

void calib_note_outside(calib_t *c, const char *name)
{
    centry_t *en = c ? note_find(c, name) : NULL;
    if (!en) return;
    en->uses++;
    en->outside++;
}

void calib_notes_reset(calib_t *c)
{
    for (size_t i = 0; i < c->n; i++) {
        c->v[i].uses = c->v[i].outside = 0;
        c->v[i].x_min = c->v[i].x_max = NAN;
        c->v[i].clamps = false;
    }
}

int calib_clamp(calib_t *c, const char *names, err_t *e)
{
    while (names && *names) {
        size_t n = strcspn(names, ",");
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), names);
        centry_t *en = entry_find(c, name);
        if (!en) return err_set(e, ERR_NOTFOUND, "calib: no parameter '%s' to clamp", name);
        en->clamp = true;
        names += n + (names[n] == ',');
    }
    return ERR_OK;
}

bool calib_clamped(calib_t *c, const char *name)
{
    centry_t *en = c ? note_find(c, name) : NULL;
    if (!en) return false;
    en->clamps = true;
    return en->clamp && en->p.lo <= en->p.hi;
}

double calib_x(calib_t *c, const char *name, double x)
{
    if (!calib_clamped(c, name) || isnan(x)) return x;
    const calib_param_t *p = calib_find(c, name);
    return x < p->lo ? p->lo : x > p->hi ? p->hi : x;
}

static bool flagged(const centry_t *en) { return en->uses && (en->outside || is_assumed(en->p.origin)); }

size_t calib_flag_count(const calib_t *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++) n += flagged(&c->v[i]);
    return n;
}

bool calib_flag_at(const calib_t *c, size_t i, calib_flag_t *out)
{
    for (size_t j = 0; j < c->n; j++) {
        const centry_t *en = &c->v[j];
        if (!flagged(en)) continue;
        if (i--) continue;
        *out = (calib_flag_t){en->p.name, en->p.origin, is_assumed(en->p.origin), en->uses, en->outside,
                              en->x_min, en->x_max, en->p.lo, en->p.hi, en->clamps};
        return true;
    }
    return false;
}

void calib_flags_print(const calib_t *c, FILE *fp)
{
    calib_flag_t f;
    for (size_t i = 0; calib_flag_at(c, i, &f); i++) {
        fprintf(fp, "  %-24s", f.name);
        if (f.outside) fprintf(fp, " outside its range [%g, %g] in %llu of %llu uses (seen %g..%g);", f.lo, f.hi,
                               (unsigned long long)f.outside, (unsigned long long)f.uses, f.x_min, f.x_max);
        if (f.assumed) fprintf(fp, " %s", f.origin);
        fputc('\n', fp);
    }
}

void calib_clamp_list(const calib_t *c, char *buf, size_t len)
{
    calib_flag_t f;
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; calib_flag_at(c, i, &f); i++) {
        if (!f.outside || !f.clamps) continue;
        int w = snprintf(buf + at, len - at, "%s%s", at ? "," : "", f.name);
        if (w < 0 || (size_t)w >= len - at) {   /* no room: the list keeps whole names */
            buf[at] = '\0';
            return;
        }
        at += (size_t)w;
    }
}

uint64_t calib_hash(const calib_t *c) { return c->hash; }

const calib_platform_t *calib_platform(const calib_t *c) { return c->platform.gpu ? &c->platform : NULL; }

const char *calib_profile(const calib_t *c) { return c->profile ? c->profile : "presets"; }

size_t calib_count(const calib_t *c) { return c->n; }

const calib_param_t *calib_at(const calib_t *c, size_t i) { return i < c->n ? &c->v[i].p : NULL; }
