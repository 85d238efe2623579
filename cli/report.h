/* report — study results as text, JSON, CSV and gnuplot plots (shared by run and capacity). */
#ifndef ODSIM_CLI_REPORT_H
#define ODSIM_CLI_REPORT_H

#include <jansson.h>
#include <stdio.h>
#include "cli/study.h"

/* Writes point i's result as the human-readable block of `odsim run`. */
void report_text(FILE *fp, const study_t *s, size_t i, const study_result_t *r);

/* The result as a JSON object (new reference; NULL when out of memory), every figure named with
 * its unit, with the provenance (version, calibration hash, resolved scenario). */
json_t *report_json(const study_t *s, size_t i, const study_result_t *r);

/* The CSV header and one row of the headline figures. */
void report_csv_header(FILE *fp);
void report_csv_row(FILE *fp, const study_result_t *r);

/* Writes DIR/results.{csv,json} and the plots (latency against context, utilisation over time,
 * latency against sessions) as SVG and PNG, atomically. Errors: ERR_IO (naming the file). A missing
 * gnuplot is not an error: the data files are written and a note goes to stderr. */
int report_write_dir(const char *dir, const study_t *s, study_result_t *const *results, size_t n, err_t *e);

/* Runs gnuplot on `script` (which must set its own terminal and output), after writing it to
 * DIR/NAME.gp. Returns ERR_OK, or ERR_NOTFOUND when gnuplot is not installed, ERR_IO otherwise. */
int report_gnuplot(const char *dir, const char *name, const char *script, err_t *e);

#endif
