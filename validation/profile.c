#include "validation/profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomicio.h"
#include "models/calib.h"
#include "models/cost_params.h"

/* A YAML double-quoted scalar. */
static void put_q(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(fp, "\\%c", *p);
        else if (*p < 0x20) fprintf(fp, "\\x%02x", *p);
        else fputc(*p, fp);
    }
    fputc('"', fp);
}

static const char *meta0(const kbset_t *set, const char *key)
{
    const char *v = kbset_n_files(set) ? kbset_meta(set, 0, key) : NULL;
    return v ? v : "unknown";
}

/* One parameter's {value, stderr, lo, hi, unit, origin} (a curve's points leave the unit to the curve). */
static void put_param(FILE *fp, const fit_param_t *p, bool unit)
{
    fprintf(fp, "{value: %.8g, stderr: %.3g", p->value, p->stderr_v);
    if (p->lo <= p->hi) fprintf(fp, ", lo: %.10g, hi: %.10g", p->lo, p->hi);
    if (unit) {
        fputs(", unit: ", fp);
        put_q(fp, p->unit);
    }
    fputs(unit ? ",\n      origin: " : ",\n        origin: ", fp);
    put_q(fp, p->origin);
    fputs("}", fp);
    if (unit) fputc('\n', fp);
}

/* The profile name, hardware and params: what models/calib.c reads. Knots of a curve are written
 * as the curve (models/cost_params.h). */
static void emit_params(FILE *fp, const fit_t *f, const kbset_t *set, const profile_info_t *info)
{
    fprintf(fp, "# Calibration profile fitted by `odsim fit` (validation/fit.c) from measured kbench CSVs.\n"
                "# Do not edit by hand: re-run the fit. Parameters absent here come from the hardware preset.\n");
    fputs("profile: ", fp);
    put_q(fp, info->profile);
    fputs("\nhardware: ", fp);
    char hw[1024];
    snprintf(hw, sizeof hw, "%s | pcie %s | %s", meta0(set, "device"), meta0(set, "pcie"), meta0(set, "virtualisation"));
    put_q(fp, hw);
    if (info->gpu && info->link && info->host) {
        fputs("\nplatform:\n  gpu: ", fp);
        put_q(fp, info->gpu);
        fputs("\n  link: ", fp);
        put_q(fp, info->link);
        fputs("\n  host: ", fp);
        put_q(fp, info->host);
        fputs("\n  virtualisation: ", fp);
        put_q(fp, meta0(set, "virtualisation"));
    }
    fputs("\nparams:\n", fp);
    bool *done = calloc(cost_curve_count, sizeof *done);   /* curves written (NULL: every knot apart) */
    for (size_t i = 0; i < fit_n_params(f); i++) {
        const fit_param_t *p = fit_param_at(f, i);
        const cost_curve_t *cv = done ? cost_curve_of(p->name, NULL) : NULL;
        if (!cv) {
            fprintf(fp, "  %s: ", p->name);
            put_param(fp, p, true);
            continue;
        }
        size_t c = (size_t)(cv - cost_curves);
        if (done[c]) continue;
        done[c] = true;
        /* the curve at its first knot fitted: every knot fitted, in the curve's order */
        fprintf(fp, "  %.*s: {unit: ", (int)strlen(cv->prefix) - 1, cv->prefix);
        put_q(fp, p->unit);
        fputs(", points: {", fp);
        bool first = true;
        for (int k = 0; k < cv->n_knots; k++) {
            const fit_param_t *q = fit_find(f, cv->knots[k]);
            if (!q) continue;
            fprintf(fp, "%s\n      %s: ", first ? "" : ",", cv->knots[k] + strlen(cv->prefix));
            put_param(fp, q, false);
            first = false;
        }
        fputs("}}\n", fp);
    }
    free(done);
}

/* The provenance sections: sources, residuals, notes. */
static void emit_sections(FILE *fp, const fit_t *f, const kbset_t *set, const profile_info_t *info)
{
    fputs("sources:\n  device: ", fp);
    put_q(fp, meta0(set, "device"));
    fputs("\n  driver: ", fp);
    put_q(fp, meta0(set, "driver"));
    fputs("\n  cuda: ", fp);
    put_q(fp, meta0(set, "cuda"));
    fputs("\n  pcie: ", fp);
    put_q(fp, meta0(set, "pcie"));
    fputs("\n  virtualisation: ", fp);
    put_q(fp, meta0(set, "virtualisation"));
    fputs("\n  iommu: ", fp);
    put_q(fp, meta0(set, "iommu"));
    fputs("\n  heldout: {file: ", fp);
    put_q(fp, info->heldout_path);
    fprintf(fp, ", fnv1a: \"%016llx\"}\n  command: ", info->heldout_fnv1a);
    put_q(fp, info->command);
    size_t nf, nh, nu;
    fit_row_counts(f, &nf, &nh, &nu);
    fprintf(fp, "\n  rows: {fit: %zu, heldout: %zu, unused: %zu}\n  files:\n", nf, nh, nu);
    for (size_t i = 0; i < kbset_n_files(set); i++) {
        const kbfile_t *kf = kbset_file(set, i);
        fputs("    - {path: ", fp);
        put_q(fp, kf->path);
        fprintf(fp, ", fnv1a: \"%016llx\", rows: %zu", (unsigned long long)kf->fnv1a, kf->n_rows);
        static const char *const keys[] = {"suite", "device", "driver", "date", "commit", "kbench"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            const char *v = kbset_meta(set, i, keys[k]);
            if (!v) continue;
            fprintf(fp, ", %s: ", keys[k]);
            put_q(fp, v);
        }
        fputs("}\n", fp);
    }
    fputs(fit_n_resid(f) ? "residuals:\n" : "residuals: {}\n", fp);
    for (size_t i = 0; i < fit_n_resid(f); i++) {
        const fit_resid_t *r = fit_resid_at(f, i);
        fputs("  ", fp);
        put_q(fp, r->name);
        fprintf(fp, ": {n: %zu, rms_rel: %.4g, max_rel: %.4g}\n", r->n, r->rms_rel, r->max_rel);
    }
    fputs(fit_n_notes(f) ? "notes:\n" : "notes: []\n", fp);
    for (size_t i = 0; i < fit_n_notes(f); i++) {
        fputs("  - ", fp);
        put_q(fp, fit_note_at(f, i));
        fputc('\n', fp);
    }
}

/* The profile text: the parameters, then the provenance sections. */
static char *render(const fit_t *f, const kbset_t *set, const profile_info_t *info)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *ms = open_memstream(&buf, &len);
    if (!ms) return NULL;
    emit_params(ms, f, set, info);
    emit_sections(ms, f, set, info);
    if (fclose(ms)) {
        free(buf);
        return NULL;
    }
    return buf;
}

int profile_write(const char *path, const fit_t *f, const kbset_t *set, const profile_info_t *info, err_t *e)
{
    char *text = render(f, set, info);
    if (!text) return err_set(e, ERR_NOMEM, "profile: out of memory");
    calib_t *c = NULL;
    if (calib_load_string(path, text, &c, e)) {
        free(text);
        return err_prefix(e, "profile: the calibration loader rejects the profile (nothing written)");
    }
    calib_free(c);
    int rc = atomicio_write(path, text, strlen(text), e);
    free(text);
    return rc;
}
