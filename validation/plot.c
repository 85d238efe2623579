#include "validation/plot.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/atomicio.h"

int plot_pred_vs_meas(const char *dir, const char *stem, const char *axis, const char *const *groups,
                      size_t n_groups, const plot_point_t *pts, size_t n_pts, char *note, size_t note_len,
                      err_t *e)
{
    note[0] = '\0';
    char dat[4096], gp[4096];
    snprintf(dat, sizeof dat, "%s/%s.dat", dir, stem);
    snprintf(gp, sizeof gp, "%s/%s.gp", dir, stem);
    size_t usable = 0;
    for (size_t i = 0; i < n_pts; i++) usable += pts[i].meas > 0 && pts[i].pred > 0;
    if (!usable) {
        snprintf(note, note_len, "nothing to plot for %s", stem);
        return ERR_OK;
    }
    atomicio_t *a = NULL;
    int rc = atomicio_open(dat, &a, e);
    if (rc) return rc;
    FILE *fp = atomicio_file(a);
    for (size_t g = 0; g < n_groups; g++) {
        fprintf(fp, "# %s\n", groups[g]);
        bool any = false;
        for (size_t i = 0; i < n_pts; i++) {
            const plot_point_t *p = &pts[i];
            if (p->group != g || !(p->meas > 0) || !(p->pred > 0)) continue;
            fprintf(fp, "%.8g %.8g %.8g %.8g\n", p->meas, isnan(p->lo) ? p->meas : p->lo, isnan(p->hi) ? p->meas : p->hi,
                    p->pred);
            any = true;
        }
        if (!any) fprintf(fp, "NaN NaN NaN NaN\n");  /* keeps the index numbering */
        fputs("\n\n", fp);
    }
    rc = atomicio_commit(a, e);
    if (rc) return rc;
    rc = atomicio_open(gp, &a, e);
    if (rc) return rc;
    fp = atomicio_file(a);
    fprintf(fp, "# predicted vs measured, one colour per group (odsim validation/plot.c)\n"
                "set logscale xy\nset xlabel 'measured %s'\nset ylabel 'predicted %s'\n"
                "set key left top font ',8'\nset grid\nset size square\nf(x) = x\n",
            axis, axis);
    for (int t = 0; t < 2; t++) {
        if (t == 0) fprintf(fp, "set terminal svg size 900,900 dynamic noenhanced\nset output '%s/%s.svg'\n", dir, stem);
        else fprintf(fp, "set terminal png size 900,900 noenhanced\nset output '%s/%s.png'\n", dir, stem);
        fputs("plot f(x) title 'predicted = measured' lt -1, f(x)*1.15 title '+-15%' dt 2 lc rgb 'gray', "
              "f(x)/1.15 notitle dt 2 lc rgb 'gray'",
              fp);
        for (size_t g = 0; g < n_groups; g++)
            fprintf(fp, ", '%s' index %zu using 1:4:2:3 with xerrorbars pt 7 ps 0.6 title '%s'", dat, g, groups[g]);
        fputs("\nunset output\n", fp);
    }
    rc = atomicio_commit(a, e);
    if (rc) return rc;
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        snprintf(note, note_len, "gnuplot not found: wrote %s and %s (run `gnuplot %s` for the SVG and PNG)", dat, gp, gp);
        return ERR_OK;
    }
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>/dev/null", gp);
    if (system(cmd) != 0) snprintf(note, note_len, "gnuplot failed on %s: no SVG/PNG", gp);
    return ERR_OK;
}
