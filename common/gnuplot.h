/* gnuplot — plots drawn by gnuplot as SVG and PNG into an output set, with no shell and no path in
 * the script: every string a script holds goes through gnuplot_quote, gnuplot runs by argument
 * vector in the set's directory (common/spawn.h), and it is told its output names as script
 * arguments (gnuplot -c), which gnuplot never parses as commands. */
#ifndef ODSIM_COMMON_GNUPLOT_H
#define ODSIM_COMMON_GNUPLOT_H

#include <stdio.h>
#include "common/err.h"
#include "common/outset.h"

/* Writes s as a gnuplot single-quoted string: quotes doubled, control characters (newline, CR,
 * tab, ...) written as spaces, so no string can end the command it is in. The one way odsim puts
 * text (titles, labels, names) into a gnuplot script. */
void gnuplot_quote(FILE *fp, const char *s);

/* Adds STEM.gp, STEM.svg and STEM.png (width_px x height_px) to the set. The script holds `data`
 * (inline datablocks: the plot needs no other file), then `setup`, then `body` once per format;
 * `gnuplot STEM.gp` run in the directory redraws them. gnuplot draws into the set's temporaries;
 * each is accepted only when gnuplot exited 0 and the file is whole (an SVG ending in </svg>, a PNG
 * in its IEND chunk) and synced, so a full disk is an error, never a torn plot.
 * Errors: ERR_NOTFOUND (gnuplot not installed: STEM.gp stays in the set, the plots are dropped),
 * ERR_IO (gnuplot failed or wrote a bad file, the message names it; the plots are dropped),
 * ERR_NOMEM, and outset_file's. */
int gnuplot_render(outset_t *set, const char *stem, int width_px, int height_px, const char *data, const char *setup,
                   const char *body, err_t *e);

#endif
