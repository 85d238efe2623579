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
/* --only idle: one context launching 150 kernels of the whole GPU (200 us each), each after the
 * host saw the one before end, alone and beside a context spinning the whole GPU: whether a
 * context keeps the GPU while its host turns around, and when an event recorded before a kernel
 * fires. Its gaps (a kernel's end to the next one's start), spans (start to end, switch-outs
 * included) and the elapsed time of the events around each, microseconds, only those while the
 * other context still spun. */
#define KB_TS_IDLE_MAX 150
typedef struct {
    int other;                           /* beside a spinning context */
    int n;
    double gap_us[KB_TS_IDLE_MAX], span_us[KB_TS_IDLE_MAX];
    double event_us[KB_TS_IDLE_MAX];     /* the events recorded before and after it, elapsed */
} kb_ts_idle_t;
/* Measures alone, then beside the other (at most 2 results); must run before this process starts
 * CUDA. Returns how many were measured. */
int kb_timeslice_idle(kb_ts_idle_t out[2]);
/* Rows idle_gap / idle_span / idle_event (beside the other), and alone (..._alone). */
void kb_timeslice_idle_rows(kb_csv_t *csv, kb_ts_idle_t *res, int n);
#endif
