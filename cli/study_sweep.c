/* study_sweep — a study's points: the data root its paths resolve under, the sweep axes, each
 * point's document and label, and the provenance lines printed with its results. It calls nothing
 * that resolves or runs a point. */
#include "cli/study.h"
#include "common/version.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/study_int.h"

/* ---- the data root: catalogs, profiles and traces are found relative to it ------------------- */

/* $ODSIM_ROOT, else the current directory when it holds models/catalog, else an installed tree's
 * share/odsim beside the executable's bin/ (make install), else the directory two levels above
 * the executable (a checkout's build/<mode>/odsim). */
static char *find_root(void)
{
    const char *env = getenv("ODSIM_ROOT");
    if (env && *env) return strdup(env);
    if (access("models/catalog/gpus.yaml", R_OK) == 0) return strdup(".");
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 64);
    if (n <= 0) return strdup(".");
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return strdup(".");
    *slash = '\0';   /* the executable's directory */
    char share[PATH_MAX + 64], probe[PATH_MAX + 96];
    snprintf(share, sizeof share, "%s/../share/odsim", exe);
    snprintf(probe, sizeof probe, "%s/models/catalog/gpus.yaml", share);
    if (access(probe, R_OK) == 0) return strdup(share);
    for (int up = 0; up < 2; up++) {
        slash = strrchr(exe, '/');
        if (!slash) return strdup(".");
        *slash = '\0';
    }
    return strdup(exe[0] ? exe : "/");
}

static char *path_under(const char *root, const char *rel)
{
    if (!rel || rel[0] == '/' || access(rel, R_OK) == 0) return strdup(rel ? rel : "");
    size_t n = strlen(root) + strlen(rel) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", root, rel);
    return p;
}

char *study_path(const study_t *s, const char *rel) { return path_under(s->root, rel); }

char *study_data_path(const char *rel)
{
    char *root = find_root();
    char *p = root ? path_under(root, rel) : NULL;
    free(root);
    return p;
}

/* ---- opening: overrides, sweep axes, every point checked ----------------------------------- */

static int collect_axes(study_t *s, err_t *e)
{
    const cfg_node_t *sw = cfg_get(cfg_root(s->doc), "sweep");
    s->n_points = 1;
    if (!sw) return ERR_OK;
    if (cfg_kind(sw) != CFG_MAP) return cfg_error(e, ERR_INVAL, sw, "expected a map of key: [values]");
    s->n_axes = cfg_size(sw);
    s->axes = calloc(s->n_axes ? s->n_axes : 1, sizeof *s->axes);
    if (!s->axes) return err_set(e, ERR_NOMEM, "out of memory");
    for (size_t a = 0; a < s->n_axes; a++) {
        const cfg_node_t *vals = cfg_at(sw, a);
        if (cfg_kind(vals) != CFG_SEQ || cfg_size(vals) == 0)
            return cfg_error(e, ERR_INVAL, vals, "a sweep axis needs a non-empty list of values");
        if (!strcmp(cfg_key_at(sw, a), "sweep") || !strncmp(cfg_key_at(sw, a), "sweep.", 6))
            return cfg_error(e, ERR_INVAL, vals, "a sweep cannot sweep itself");
        if (!strcmp(cfg_key_at(sw, a), "catalog"))
            return cfg_error(e, ERR_INVAL, vals, "the catalog directory is one per study: it cannot be swept");
        s->axes[a] = (study_axis_t){cfg_key_at(sw, a), vals, cfg_size(vals)};
        if (s->n_points > 1000000 / s->axes[a].n)
            return cfg_error(e, ERR_RANGE, vals, "the sweep has over a million points");
        s->n_points *= s->axes[a].n;
    }
    return ERR_OK;
}

/* Index of axis a's value at point i (the last axis varies fastest). */
static size_t axis_index(const study_t *s, size_t i, size_t a)
{
    for (size_t b = s->n_axes; b-- > a + 1;) i /= s->axes[b].n;
    return i % s->axes[a].n;
}

/* A short text for a swept value: the scalar, or a map's scalars as k=v joined by commas. */
static void value_brief(const cfg_node_t *v, char *buf, size_t n)
{
    if (cfg_str(v)) {
        snprintf(buf, n, "%s", cfg_str(v));
        return;
    }
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < cfg_size(v) && len < n; i++) {
        const cfg_node_t *c = cfg_at(v, i);
        const char *key = cfg_key_at(v, i);
        if (key && (!strcmp(key, "name") || !strcmp(key, "method"))) key = NULL; /* the value names itself */
        len += (size_t)snprintf(buf + len, n - len, "%s%s%s%s", i ? "," : "", key ? key : "", key ? "=" : "",
                                cfg_str(c) ? cfg_str(c) : "...");
    }
}

static int make_labels(study_t *s, err_t *e)
{
    s->labels = calloc(s->n_points, sizeof *s->labels);
    if (!s->labels) return err_set(e, ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < s->n_points; i++) {
        char buf[1024] = "";
        size_t len = 0;
        for (size_t a = 0; a < s->n_axes; a++) {
            char txt[256];
            value_brief(cfg_at(s->axes[a].values, axis_index(s, i, a)), txt, sizeof txt);
            len += (size_t)snprintf(buf + len, len < sizeof buf ? sizeof buf - len : 0, "%s%s=%s", a ? " " : "", s->axes[a].path, txt);
            if (len >= sizeof buf) len = sizeof buf - 1;
        }
        if (!(s->labels[i] = strdup(s->n_axes ? buf : "base"))) return err_set(e, ERR_NOMEM, "out of memory");
    }
    return ERR_OK;
}

int study_point_doc(const study_t *s, size_t i, bool with_sweep, cfg_doc_t **out, err_t *e)
{
    int rc = with_sweep ? cfg_clone(s->doc, out, e) : cfg_clone_without(s->doc, "sweep", out, e);
    for (size_t a = 0; !rc && a < s->n_axes; a++)
        rc = cfg_set_node(*out, s->axes[a].path, cfg_at(s->axes[a].values, axis_index(s, i, a)), e);
    if (rc) {
        cfg_free(*out);
        *out = NULL;
    }
    return rc;
}

size_t study_n_points(const study_t *s) { return s->n_points; }
const char *study_point_label(const study_t *s, size_t i) { return i < s->n_points ? s->labels[i] : "?"; }

void study_point_emit(const study_t *s, size_t i, FILE *fp)
{
    cfg_doc_t *d;
    err_t e;
    if (study_point_doc(s, i, true, &d, &e)) {
        fprintf(fp, "# (cannot emit: %s)\n", e.msg);
        return;
    }
    cfg_emit(cfg_root(d), fp, 0);
    cfg_free(d);
}

void study_provenance(const study_t *s, size_t i, FILE *fp, const char *comment)
{
    fprintf(fp, "%s odsim %s (%s)\n%s scenario: %s, point %zu: %s\n", comment, ODSIM_VERSION, odsim_git_rev, comment,
            s->name, i, study_point_label(s, i));
    fprintf(fp, "%s calibration hash: %016llx\n%s resolved scenario:\n", comment, (unsigned long long)s->calib_hash,
            comment);
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) return;
    study_point_emit(s, i, mem);
    fclose(mem);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) fprintf(fp, "%s   %s\n", comment, line);
    free(buf);
}

int study_sweep_init(study_t *s, err_t *e)
{
    s->root = find_root();
    if (!s->root) return err_set(e, ERR_NOMEM, "out of memory");
    int rc = collect_axes(s, e);
    if (!rc) rc = make_labels(s, e);
    return rc;
}
