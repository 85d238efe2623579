/* trace_stats — what `odsim trace info` reports: counts, time span, percentiles of context length,
 * prefill, decode and think time, and peak concurrency.
 *
 * Concurrency: a session is alive from its arrival to the end of its last turn. A turn starts at its
 * arrival when the trace gives one, else at the previous turn's end plus its think time, and lasts
 * its service time: prefill_tokens / prefill_tps + decode_tokens / decode_tps under assumed rates
 * (trace_stats_set_service; `odsim trace info --prefill-tps P --decode-tps D`), zero when none are
 * given, so the default peak is a lower bound of what a replay sees (one-turn sessions then live
 * for an instant). In a closed-population trace the peak is the population.
 *
 * Memory is bounded whatever the trace's length: percentiles come from traces/trace_sketch.h (exact,
 * nearest rank, up to 65,536 values per distribution; past that within 0.2% relative), and the peak
 * holds only the sessions alive at the latest arrival (sessions come in arrival order). */
#ifndef ODSIM_TRACES_TRACE_STATS_H
#define ODSIM_TRACES_TRACE_STATS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "common/err.h"
#include "traces/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct trace_dist {
    size_t n;
    double mean, min, p50, p90, p99, max;
} trace_dist_t;

typedef struct trace_summary {
    uint64_t sessions, turns, one_turn_sessions, forked_sessions;
    bool has_span;                 /* some arrival time is known */
    int64_t first_ns, last_ns;     /* earliest session arrival, latest known arrival or end */
    trace_dist_t input_tokens;     /* per turn: context at the request */
    trace_dist_t prefill_tokens;   /* per turn */
    trace_dist_t decode_tokens;    /* per turn */
    trace_dist_t think_s;          /* per turn that has one */
    trace_dist_t turns_per_session;
    trace_dist_t session_context;  /* per session: largest input + decode */
    uint64_t peak_concurrency;
    bool concurrency_is_population;
} trace_summary_t;

typedef struct trace_stats trace_stats_t;

int trace_stats_new(trace_stats_t **out, err_t *e);
void trace_stats_free(trace_stats_t *st);
/* Assumed service rates for the concurrency estimate (tokens/s per session; <= 0: not counted). Call
 * before adding sessions. */
void trace_stats_set_service(trace_stats_t *st, double prefill_tps, double decode_tps);
/* Accumulates one session. Errors: ERR_INVAL (an arrival before the previous session's), ERR_NOMEM. */
int trace_stats_add(trace_stats_t *st, const trace_session_t *s, err_t *e);
/* Computes the summary of what was added (h: for the population of closed traces). */
int trace_stats_summary(trace_stats_t *st, const trace_header_t *h, trace_summary_t *out, err_t *e);

/* Streams path through a reader into *out (service rates as trace_stats_set_service); *hdr receives a copy of the header when non-NULL
 * (trace_header_free it). Errors: those of trace_reader_*. */
int trace_stats_file(const char *path, double prefill_tps, double decode_tps, trace_summary_t *out,
                     trace_header_t *hdr, err_t *e);

/* Human-readable report. */
void trace_summary_print(FILE *fp, const char *path, const trace_header_t *h, const trace_summary_t *s);
/* The same as a JSON object (new reference). */
json_t *trace_summary_json(const char *path, const trace_header_t *h, const trace_summary_t *s);

#ifdef __cplusplus
}
#endif
#endif
