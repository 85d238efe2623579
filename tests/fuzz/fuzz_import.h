/* The body shared by the importer fuzz targets (one target per format, so each builds its own corpus):
 * an importer on arbitrary bytes must import a trace whose every session passes the checks, or report
 * an error naming the input; stretching an imported trace must keep every session valid. */
#ifndef ODSIM_TESTS_FUZZ_IMPORT_H
#define ODSIM_TESTS_FUZZ_IMPORT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "traces/import.h"

static void fuzz_check_all(const trace_t *t)
{
    trace_check_state_t st;
    err_t e;
    memset(&st, 0, sizeof st);
    for (size_t i = 0; i < t->n_sessions; i++)
        if (trace_session_check(&t->hdr, &t->sessions[i], &st, &e)) abort();
}

static int fuzz_import(trace_format_t fmt, const uint8_t *data, size_t size)
{
    trace_t t;
    err_t e;
    trace_import_opts_t o;
    trace_import_opts_default(&o);
    if (trace_import_mem(fmt, "fuzz.in", (const char *)data, size, &o, &t, &e)) {
        if (!strstr(e.msg, "fuzz.in")) abort(); /* every error names the input */
        trace_free(&t);
        return 0;
    }
    fuzz_check_all(&t);
    if (trace_scale(&t, 3.5, 0, &e) == 0) fuzz_check_all(&t);
    trace_free(&t);
    return 0;
}

#endif
