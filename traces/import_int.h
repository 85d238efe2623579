/* import_int — helpers shared by the importers (not a public API). */
#ifndef ODSIM_TRACES_IMPORT_INT_H
#define ODSIM_TRACES_IMPORT_INT_H

#include <jansson.h>
#include <stdbool.h>
#include "traces/import.h"

/* Iterates the lines of a buffer: each call gives the next line (without "\n" or "\r\n") and its
 * 1-based number; blank lines are skipped. Returns false at the end. */
typedef struct line_iter {
    const char *buf;
    size_t len, pos;
    int line;
} line_iter_t;
void line_iter_init(line_iter_t *it, const char *buf, size_t len);
bool line_iter_next(line_iter_t *it, const char **s, size_t *n, int *line);

/* The years whose every instant int64 nanoseconds since 1970 hold (it spans 1677-09-21 to
 * 2262-04-11): the bounds of an imported date. */
#define IMPORT_YEAR_MIN 1678
#define IMPORT_YEAR_MAX 2261

/* Parses `YYYY-MM-DD[ T]HH:MM:SS[.fraction][Z|+00:00]` (no zone means UTC; up to 9 fractional
 * digits) into ns since 1970-01-01. Returns ERR_OK, ERR_PARSE on any deviation from the form, or
 * ERR_RANGE for a year outside [IMPORT_YEAR_MIN, IMPORT_YEAR_MAX]. */
int import_parse_datetime(const char *s, size_t n, int64_t *ns);
/* *span = to - from for two parsed dates (their difference may exceed int64); false when it is more
 * than TRACE_MAX_TIME_NS (100 years, the longest time a trace holds) either way. */
bool import_span_ns(int64_t from, int64_t to, int64_t *span);

/* A line parsed as one JSON object; on error sets e to `NAME:LINE: ...`. */
int import_json_line(const char *name, int line, const char *s, size_t n, json_t **out, err_t *e);
/* A required non-negative integer token count <= TRACE_MAX_TOKENS. */
int import_json_tokens(const char *name, int line, json_t *obj, const char *key, uint64_t *out, err_t *e);

/* Validates every session of t in order, naming `line_of[i]` (first line of session i) on error. */
int import_check(const char *name, const trace_t *t, const int *line_of, err_t *e);
/* Adds the report every importer gives: rows, sessions, turns, one-turn sessions, max turns. */
int import_report_common(trace_t *t, size_t rows, err_t *e);

int import_mooncake(const char *name, const char *buf, size_t len, const trace_import_opts_t *o, trace_t *t,
                    err_t *e);
int import_azure(const char *name, const char *buf, size_t len, const trace_import_opts_t *o, trace_t *t,
                 err_t *e);
int import_tracelab(const char *name, const char *buf, size_t len, const trace_import_opts_t *o, trace_t *t,
                    err_t *e);

#endif
