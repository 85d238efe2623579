/* import — real traces to odsim traces: Mooncake JSONL, Azure LLM inference CSV, TraceLab JSONL.
 *
 * Each importer reads the whole source (bounded by TRACE_IMPORT_MAX_BYTES), builds a trace_t in memory,
 * validates every session (trace_session_check) and optionally stretches contexts (trace_scale). The
 * header records the source file, the importer's parameters (`params`) and what it found (`report`:
 * rows, sessions, turns, forks, one-turn sessions, ...). Errors name the file and line:
 * `conv.jsonl:17: field 'input_length': negative token count -3`.
 *
 * - mooncake: rows {timestamp (ms), input_length, output_length, hash_ids (512-token blocks)} have no
 *   session id. Session rule: a request R continues the session of an earlier request P when P's hash
 *   ids without its last block are a prefix of R's, that prefix is at least M full blocks
 *   (min_shared_blocks), P arrived strictly earlier and R.input >= P.input + P.output. The parent is
 *   the P with the longest such prefix; among equals, the latest one that has no continuation yet,
 *   else the latest. If the parent already has a continuation, R starts a new session forked from it
 *   (a fork). Default M = 2: in the FAST'25 conversation trace every row starts with block 0 (a shared
 *   system prompt), so M = 1 glues unrelated requests (6,817 "forks"); beyond block 0 no block is
 *   shared by unrelated rows. Turn 0's shared prefix is the longest run of leading full blocks seen in
 *   any earlier request (shared_prefix_id = the hash id of its last block); it is reused, not
 *   prefilled (a request computes at least one token). A continuation reuses the parent's input and
 *   output. Open loop only (arrivals as recorded; think times are unknown).
 * - azure: CSV with columns TIMESTAMP (`2023-11-16 18:17:03.9799600`, no zone), ContextTokens,
 *   GeneratedTokens, in any order; one one-turn session per row, arrivals relative to the first row.
 *   Open loop only.
 * - tracelab: one LLM call per row: session_id, round_index, input_tokens_total = prefix_tokens +
 *   newly_append_tokens, output_tokens, timing_events[] {event_type, timestamp (ISO-8601 UTC)}. A turn
 *   is ready at its last input event (user_message / tool_result; the first event if it has none) and
 *   ends at its last event; think_ns = ready(i) - end(i-1) (tool latency or user time), arrival_ns =
 *   ready(i) relative to the earliest turn of the file. input = input_tokens_total, prefill =
 *   newly_append_tokens, decode = output_tokens (which include reasoning tokens); turn 0's cached
 *   prefix_tokens is recorded as its shared prefix. Open and closed loop. */
#ifndef ODSIM_TRACES_IMPORT_H
#define ODSIM_TRACES_IMPORT_H

#include <stddef.h>
#include <stdint.h>
#include "common/err.h"
#include "traces/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TRACE_IMPORT_MAX_BYTES (4ull << 30)
#define TRACE_MOONCAKE_BLOCK_TOKENS 512
#define TRACE_MOONCAKE_DEFAULT_M 2

typedef enum { TRACE_FMT_MOONCAKE, TRACE_FMT_AZURE, TRACE_FMT_TRACELAB } trace_format_t;

typedef struct trace_import_opts {
    double scale;             /* stretch contexts by this factor (>= 1); 1: as recorded */
    uint64_t scale_to_tokens; /* > 0: stretch so the largest context is this many tokens */
    int min_shared_blocks;    /* Mooncake M (>= 1) */
} trace_import_opts_t;

/* Defaults: scale 1, no target, M = TRACE_MOONCAKE_DEFAULT_M. */
void trace_import_opts_default(trace_import_opts_t *o);

/* "mooncake", "azure" or "tracelab" -> *out. Errors: ERR_NOTFOUND. */
int trace_format_parse(const char *name, trace_format_t *out, err_t *e);
const char *trace_format_name(trace_format_t f);

/* Imports len bytes at buf (`name` stands for the file in messages and the header) into *out
 * (initialised here; trace_free it, also after an error). Errors: ERR_PARSE (bad input, naming the
 * line), ERR_INVAL (bad options), ERR_RANGE, ERR_NOMEM. */
int trace_import_mem(trace_format_t f, const char *name, const char *buf, size_t len,
                     const trace_import_opts_t *o, trace_t *out, err_t *e);

/* As trace_import_mem, reading path (messages name path; the header records its base name and size). */
int trace_import_file(trace_format_t f, const char *path, const trace_import_opts_t *o, trace_t *out, err_t *e);

#ifdef __cplusplus
}
#endif
#endif
