/* timeslice.h: the time slice and context-switch time between separate CUDA contexts, measured
 * by processes forked before the caller starts CUDA (see timeslice.cu). */
#ifndef KB_TIMESLICE_H
#define KB_TIMESLICE_H
#include "kb.h"

#define KB_TS_MAX_PROCS 3
#define KB_TS_MAX_RESULTS (2 * (KB_TS_MAX_PROCS - 1)) /* N = 2..3, one thread and the whole GPU */
#define KB_TS_MAX_SAMPLES 8192

typedef struct {
    int procs;
    int full;                            /* the whole GPU spins, not one thread */
    int n_runs, n_gaps;
    double runs_us[KB_TS_MAX_SAMPLES];   /* a context's runs between switch-outs */
    double gaps_us[KB_TS_MAX_SAMPLES];   /* its switch-outs */
} kb_ts_result_t;

/* Measures 2..KB_TS_MAX_PROCS processes spinning one thread, then the whole GPU (at most max_n
 * results); must run before this process starts CUDA. Returns how many were measured. */
int kb_timeslice_measure(kb_ts_result_t *out, int max_n);
/* One row per result and variant (run, gap), times in microseconds. */
void kb_timeslice_rows(kb_csv_t *csv, kb_ts_result_t *res, int n);
#endif
