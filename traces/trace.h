/* trace — the in-memory form of an odsim session trace: header, sessions, turns.
 *
 * These plain structs are what the reader returns, the writer takes, the generator produces and the
 * importers build; protobuf-c types stay inside trace_io.c. Field meanings and the token accounting
 * rules are those of traces/odsim_trace.proto (read its header comment): a turn carries its whole
 * context (`input_tokens`), the part to compute (`prefill_tokens`, the rest is a reused prefix) and
 * the tokens it generates (`decode_tokens`). Times are integer nanoseconds; TRACE_NONE marks a time
 * or id the source does not give. */
#ifndef ODSIM_TRACES_TRACE_H
#define ODSIM_TRACES_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TRACE_FORMAT_VERSION 1u
#define TRACE_NONE (-1)                        /* an absent time, user or parent */
#define TRACE_MAX_TOKENS 1000000000ull          /* per count: 1e9 tokens is absurd, not a context */
#define TRACE_MAX_TIME_NS 3153600000000000000ll /* 100 years */
#define TRACE_MAX_TURNS 4000000ull              /* per session */

typedef enum { TRACE_TURN_UNKNOWN = 0, TRACE_TURN_USER = 1, TRACE_TURN_TOOL = 2 } trace_turn_kind_t;
typedef enum { TRACE_ARRIVALS_OPEN = 0, TRACE_ARRIVALS_CLOSED = 1 } trace_arrivals_t;

typedef struct trace_turn {
    int64_t arrival_ns;            /* since the trace origin; TRACE_NONE when unknown */
    int64_t think_ns;              /* previous turn's end -> this turn's input; TRACE_NONE */
    uint64_t input_tokens;         /* whole context of the request */
    uint64_t prefill_tokens;       /* to compute; input - prefill is a reused prefix */
    uint64_t decode_tokens;        /* generated */
    uint64_t shared_prefix_tokens; /* leading tokens shared with other sessions; 0: none */
    uint64_t shared_prefix_id;     /* meaningful when shared_prefix_tokens > 0 */
    trace_turn_kind_t kind;
} trace_turn_t;

typedef struct trace_session {
    uint64_t id;
    int64_t arrival_ns;     /* open arrivals: first turn's arrival; TRACE_NONE otherwise */
    int64_t user;           /* closed population: the user running it; TRACE_NONE otherwise */
    int64_t start_think_ns; /* closed population: gap after the user's previous session; TRACE_NONE */
    int64_t forked_from;    /* parent session id; TRACE_NONE */
    uint64_t fork_tokens;   /* context shared with the parent at the fork */
    char *key;              /* the source's session id (owned), or NULL */
    trace_turn_t *turns;    /* owned */
    size_t n_turns, cap_turns;
} trace_session_t;

typedef struct trace_kv {
    char *key, *value; /* owned */
} trace_kv_t;

typedef struct trace_header {
    uint32_t format_version;          /* TRACE_FORMAT_VERSION */
    char *source;                     /* "mooncake", "azure", "tracelab", "generator", ... */
    char *source_file;                /* or NULL */
    uint64_t source_bytes;            /* 0 when unknown */
    char *made_by;                    /* "odsim VERSION (REV) ..." */
    trace_kv_t *params;               /* importer / generator parameters */
    size_t n_params;
    trace_kv_t *report;               /* what the import found */
    size_t n_report;
    char *generator_config;           /* resolved YAML, or NULL */
    bool has_seed;
    uint64_t seed;
    bool open_loop, closed_loop;      /* replay modes supported */
    trace_arrivals_t session_arrivals;
    uint32_t population;              /* TRACE_ARRIVALS_CLOSED */
    double scale_factor;              /* 1: token counts as recorded */
    uint64_t scale_target_tokens;     /* 0 when not --scale-to */
    uint64_t unscaled_max_input_tokens; /* 0 when unscaled */
    char *notes;                      /* or NULL */
} trace_header_t;

/* A whole trace in memory (importers build one; small traces only: the reader streams). */
typedef struct trace {
    trace_header_t hdr;
    trace_session_t *sessions;
    size_t n_sessions, cap_sessions;
} trace_t;

/* ---- header ---- */

/* Initialises h: version TRACE_FORMAT_VERSION, scale 1, no strings, open arrivals, no replay mode.
 * source and made_by are set to copies of the arguments (either may be NULL). Errors: ERR_NOMEM. */
int trace_header_init(trace_header_t *h, const char *source, const char *made_by, err_t *e);
/* Frees every string h owns and zeroes it. h may be zeroed already. */
void trace_header_free(trace_header_t *h);
/* Replaces *dst (a string field of a header) with a copy of src (NULL allowed). Errors: ERR_NOMEM. */
int trace_strset(char **dst, const char *src, err_t *e);
/* Appends key = printf(fmt, ...) to h's params (report = false) or report (true). Errors: ERR_NOMEM. */
int trace_header_add(trace_header_t *h, bool report, const char *key, err_t *e, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The value of key in h's params or report, or NULL. */
const char *trace_header_get(const trace_header_t *h, bool report, const char *key);
/* Checks a header: version, units, replay flags, population (ERR_INVAL with a message). */
int trace_header_check(const trace_header_t *h, err_t *e);
/* "odsim VERSION (REV)" followed by what (may be NULL), into buf. */
void trace_made_by(char *buf, size_t len, const char *what);

/* ---- sessions ---- */

/* Zeroes s with every optional field TRACE_NONE. */
void trace_session_init(trace_session_t *s);
/* Clears s's turns and optional fields, keeping its turn buffer for reuse. */
void trace_session_reset(trace_session_t *s);
/* Frees what s owns and re-initialises it. */
void trace_session_free(trace_session_t *s);
/* Appends a turn (copied). Errors: ERR_NOMEM, ERR_RANGE (more than TRACE_MAX_TURNS). */
int trace_session_add_turn(trace_session_t *s, const trace_turn_t *t, err_t *e);
/* A zeroed turn with every optional field TRACE_NONE / 0. */
trace_turn_t trace_turn_blank(void);

/* Validation state carried from session to session (ids increasing, arrivals non-decreasing). */
typedef struct trace_check_state {
    bool any;
    uint64_t last_id;
    int64_t last_arrival_ns;
    uint64_t sessions, turns;
} trace_check_state_t;

/* Checks one session against the header and the sessions before it (st, updated on success): a turn
 * or more; every count <= TRACE_MAX_TOKENS; prefill <= input; the reuse rule of the .proto; times
 * in [0, TRACE_MAX_TIME_NS], turn arrivals non-decreasing and not before the session's; the fields
 * the header's replay modes require; ids strictly increasing, forks pointing back; open arrivals
 * non-decreasing; closed users < population. Errors: ERR_PARSE naming the session and turn. */
int trace_session_check(const trace_header_t *h, const trace_session_t *s, trace_check_state_t *st,
                        err_t *e);

/* ---- whole traces ---- */

void trace_init(trace_t *t);
void trace_free(trace_t *t);
/* Appends an empty session (initialised) and returns it in *out. Errors: ERR_NOMEM. */
int trace_add_session(trace_t *t, trace_session_t **out, err_t *e);
/* Largest input_tokens over all turns. */
uint64_t trace_max_input(const trace_t *t);

/* Stretches every context of t by k >= 1 keeping arrivals, think times, decode tokens and turn
 * structure: prefill, shared-prefix and fork tokens become floor(k * x); a reused prefix becomes
 * floor(k * reused) capped at what the session held before the turn, so continuations stay exact;
 * input = reused + prefill. No scaled input exceeds floor(k * unscaled input). The header records
 * the factor, the unscaled maximum and a note. When target_tokens > 0, k is the largest factor whose
 * largest input is <= target (it starts from target / max input, which must be >= 1, and is raised
 * by bisection because continuations keep their decode tokens unscaled); the largest input then
 * equals the target unless rounding makes it unreachable (a few tokens below). Errors: ERR_INVAL (k < 1, not finite), ERR_RANGE (a count would exceed
 * TRACE_MAX_TOKENS). */
int trace_scale(trace_t *t, double k, uint64_t target_tokens, err_t *e);

#ifdef __cplusplus
}
#endif
#endif
