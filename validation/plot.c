#include "validation/plot.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/gnuplot.h"
#include "common/outset.h"

/* One datablock index per group (numbers only; the names reach the script through gnuplot_quote). */
static void write_data(FILE *fp, size_t n_groups, const plot_point_t *pts, size_t n_pts)
{
    fputs("$pts << EOD\n", fp);
    for (size_t g = 0; g < n_groups; g++) {
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
    fputs("EOD\n", fp);
}

int plot_pred_vs_meas(const char *dir, const char *stem, const char *axis, const char *const *groups,
                      size_t n_groups, const plot_point_t *pts, size_t n_pts, char *note, size_t note_len,
                      err_t *e)
{
    note[0] = '\0';
    size_t usable = 0;
    for (size_t i = 0; i < n_pts; i++) usable += pts[i].meas > 0 && pts[i].pred > 0;
    if (!usable) {
        snprintf(note, note_len, "nothing to plot for %s", stem);
        return ERR_OK;
    }
    char *data = NULL, *setup = NULL, *body = NULL;
    size_t dl = 0, sl = 0, bl = 0;
    FILE *d = open_memstream(&data, &dl), *s = open_memstream(&setup, &sl), *b = open_memstream(&body, &bl);
    if (d && s && b) {
        write_data(d, n_groups, pts, n_pts);
        fputs("# predicted vs measured, one colour per group (odsim validation/plot.c)\nset logscale xy\nset xlabel ", s);
        char lab[512];
        snprintf(lab, sizeof lab, "measured %s", axis);
        gnuplot_quote(s, lab);
        fputs("\nset ylabel ", s);
        snprintf(lab, sizeof lab, "predicted %s", axis);
        gnuplot_quote(s, lab);
        fputs("\nset key left top font ',8'\nset grid\nset size square\nf(x) = x\n", s);
        fputs("plot f(x) title 'predicted = measured' lt -1, f(x)*1.15 title '+-15%' dt 2 lc rgb 'gray', "
              "f(x)/1.15 notitle dt 2 lc rgb 'gray'", b);
        for (size_t g = 0; g < n_groups; g++) {
            fprintf(b, ", $pts index %zu using 1:4:2:3 with xerrorbars pt 7 ps 0.6 title ", g);
            gnuplot_quote(b, groups[g]);
        }
    }
    if (d) fclose(d);
    if (s) fclose(s);
    if (b) fclose(b);
    outset_t *set = NULL;
    int rc = d && s && b && data && setup && body ? outset_open(dir, &set, e) : err_set(e, ERR_NOMEM, "out of memory");
    if (!rc) {
        outset_no_manifest(set);
        rc = gnuplot_render(set, stem, 900, 900, data, setup, body, e);
        if (rc == ERR_NOTFOUND) {
            snprintf(note, note_len, "%s", e->msg);
            rc = ERR_OK;
        }
        if (rc) outset_abort(set);
        else rc = outset_commit(set, e);
    }
    free(data);
    free(setup);
    free(body);
    return rc;
}
