/* tracegen — synthetic agent sessions drawn with GSL (mt19937), deterministic for a seed.
 *
 * Every parameter is declared in a cfg_param_t table with its default, range and meaning
 * (`odsim trace gen --params` prints it; traces/gen_default.yaml lists the defaults). A session:
 * an initial context (user turn 0), then turns that each append a tool's output (or, with
 * probability user_turn_prob, a user message) after a tool time (or user think time), and decode;
 * the context grows by appended + decoded tokens until the session's drawn number of turns is done
 * or max_context_tokens is reached (the last turn is cut to fit). Sessions arrive as a Poisson
 * process or come from a closed population of users. The trace is closed loop (think times; no
 * turn arrival times): replay it closed loop.
 *
 * In-memory use (scenarios that give generator parameters inline):
 *
 *     tracegen_t *g; trace_session_t s; trace_session_init(&s);
 *     if (tracegen_new(params_map_or_NULL, NULL, &g, &e)) fail(e.msg);   // NULL seed: cfg's `seed`
 *     const trace_header_t *h = tracegen_header(g);
 *     while ((rc = tracegen_next_session(g, &s, &e)) == 1) replay(&s);
 *     trace_session_free(&s); tracegen_free(g);
 */
#ifndef ODSIM_TRACES_TRACEGEN_H
#define ODSIM_TRACES_TRACEGEN_H

#include <stdint.h>
#include <stdio.h>
#include "common/cfg.h"
#include "common/err.h"
#include "traces/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tracegen tracegen_t;

/* Binds cfg (a map of the parameters, or NULL for all defaults; unknown keys are errors naming
 * file:line:col) and seeds the generator with *seed, or with the cfg's `seed` when seed is NULL.
 * On success *out owns the generator. Errors: ERR_INVAL / ERR_RANGE (bad parameter), ERR_NOMEM. */
int tracegen_new(const cfg_node_t *cfg, const uint64_t *seed, tracegen_t **out, err_t *e);

/* The header the generator's trace carries (source "generator", resolved parameters as YAML in
 * generator_config, the seed, closed loop). Owned by g. */
const trace_header_t *tracegen_header(const tracegen_t *g);
/* The most sessions g draws (its `sessions` parameter; 0: unbounded). */
uint64_t tracegen_sessions_max(const tracegen_t *g);

/* The median of the sessions' initial contexts and the context they grow to at most, in tokens. */
void tracegen_contexts(const tracegen_t *g, uint64_t *initial_median, uint64_t *max);

/* Draws the next session into *s (initialised by the caller; content replaced, buffer reused).
 * Returns 1, 0 when `sessions` sessions were drawn (never when sessions is 0: unbounded), or an
 * ERR_* code. */
int tracegen_next_session(tracegen_t *g, trace_session_t *s, err_t *e);

void tracegen_free(tracegen_t *g);

/* Prints the parameter table (key, type, default, range, meaning). */
void tracegen_params_describe(FILE *fp);

/* Generates the whole trace into path atomically; *n_sessions and *n_turns (either may be NULL)
 * receive the counts. sessions must be finite. Errors as above, ERR_IO. */
int tracegen_write_file(const cfg_node_t *cfg, const uint64_t *seed, const char *path, uint64_t *n_sessions,
                        uint64_t *n_turns, err_t *e);

#ifdef __cplusplus
}
#endif
#endif
