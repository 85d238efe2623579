/* report — study results as text, JSON, CSV and gnuplot plots (shared by run and capacity). */
#ifndef ODSIM_CLI_REPORT_H
#define ODSIM_CLI_REPORT_H

#include <jansson.h>
#include <stdio.h>
#include "cli/study.h"
#include "common/outset.h"

/* Writes point i's result as the human-readable block of `odsim run`. */
void report_text(FILE *fp, const study_t *s, size_t i, const study_result_t *r);

/* The result as a JSON object (new reference; NULL when out of memory), every figure named with
 * its unit, with the provenance (version, calibration hash, resolved scenario). */
json_t *report_json(const study_t *s, size_t i, const study_result_t *r);

/* s as a CSV field in double quotes: quotes doubled, control characters written as spaces, so a
 * record is one line. */
void report_csv_field(FILE *fp, const char *s);

/* The CSV header and one row of the headline figures. */
void report_csv_header(FILE *fp);
void report_csv_row(FILE *fp, const study_result_t *r);

/* Checks, before simulating, that report_write_dir may write into DIR (outset_check: DIR is a
 * directory or can be made, and none of its output names is a device, FIFO, directory, link,
 * read-only or hard-linked file). Errors: ERR_IO naming the path. */
int report_check_dir(const char *dir, err_t *e);

/* Adds to set results.{csv,json}, latency_vs_context.csv, utilisation.csv and the plots (latency
 * against context, utilisation over time, latency against sessions: STEM.{gp,svg,png}). A missing
 * gnuplot is not an error: a note goes to stderr and the scripts stay. Errors: ERR_IO (naming the
 * file; gnuplot failed or wrote a bad plot), ERR_NOMEM. */
int report_add(outset_t *set, const study_t *s, study_result_t *const *results, size_t n, err_t *e);

/* report_add into DIR as one set (common/outset.h): every file appears together with DIR/MANIFEST
 * written last, or, on any error, nothing in DIR changes. */
int report_write_dir(const char *dir, const study_t *s, study_result_t *const *results, size_t n, err_t *e);

/* gnuplot_render, except that a missing gnuplot is a note on stderr, not an error. */
int report_plot(outset_t *set, const char *stem, int width_px, int height_px, const char *data, const char *setup,
                const char *body, err_t *e);

/* A figure as JSON: the number, or null where it is NAN (no sample, never 0). */
json_t *report_num(double v);

#endif
