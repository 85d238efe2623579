/* probe — the scenario that reproduces one held-out measured case, for the study assembly
 * (cli/study.h), so a validation prediction goes through the same providers and engine as a study.
 *
 *   name: "validate step.csv:12"
 *   hardware: {box: h200-1}
 *   calibration: "models/calib/h200.yaml"
 *   model: {name: qwen3-8b}                         (the row's model column, or qwen3-8b)
 *   method: {method: fathom, budget: 56, k: 2048, layout: interleaved, placement: host,
 *            index_fetch: sm}
 *   serving: {mode: processes}                      (when the row's policy is a serving mode)
 *   workload: {kind: probe, probe: {what: op|layer_step|session_step, op, variant, n_tokens, heads,
 *              bits, k, batch, piece_bytes, region_bytes, pieces, blocks, placement, layout,
 *              sessions, steps, streams}}
 *   run: {replications: 1, seed: 1, sample_calibration: false}
 *
 * Keys whose cell is empty are left out (the study's defaults apply). `what` is layer_step or
 * session_step for those ops, else op. `sessions` is the larger of procs and streams (≥ 1);
 * `steps` is the row's reps (≥ 20, ≤ 200) so percentiles have samples.
 *
 * The method is the row's method column, else its variant when that names one (kbench's scan
 * rows), else dense for attn_dense and fathom for other ops (an op's form is the same in every
 * sparse method). kbench's names are mapped: method pertoken136 → pertoken (budget from bits), landmark8 →
 * landmark with page 8 (hashattn and landmark budgets are fixed, dense has none); the layout's
 * first ';' field when it is a method layout (winner-fetch layouts: apart → split, token → token
 * with select shared, pageP → landmark with page P); the index placement hbm_all → hbm, none for dense
 * (the probe keeps the raw value: kbench's hbm_all also puts K/V in HBM; dense with hbm_all gets
 * window = n_tokens, all of K/V in the dense HBM window); policy "fetch:sm" /
 * "fetch:ce..." → index_fetch sm / ce; policy "procs:N" → mode processes, "streams:N" → streams
 * (the whole suite's "streams:N;fetch:PATH" both: a decode step over every layer of the model, as
 * the concurrency suite's session steps). A sparse method's row asks for its k (2048 where the row
 * gives none, kbench's) and for the selection its kernels ran with (ops->select: HashAttention per
 * query head, the others per KV head), whatever the defaults. Fathom's and SparQ's rows ask for
 * index_layout chunked (kbench stores their planes channel-major within each chunk of T tokens) and
 * index_fetch sm unless the row names the copy engine. */
#ifndef ODSIM_VALIDATION_PROBE_H
#define ODSIM_VALIDATION_PROBE_H

#include <stdbool.h>

#include "common/err.h"
#include "validation/kbcsv.h"

/* Writes the scenario for r into *out (heap, NUL-terminated; caller frees). box names the
 * hardware preset, calib_path the profile; busy_start: r's file says its step repetitions start with
 * the GPU busy (kbench's `# start: busy...` header), so no stage's launch, and not the step's first,
 * falls in the timed window (launch_hidden); key_sigma2: the header's `key_sigma2` value (the
 * variances of the synthetic key channels kbench planned Fathom over; NULL when absent).
 * Errors: ERR_NOMEM, ERR_INVAL (a planned Fathom row and no key_sigma2). */
int probe_scenario(const kbrow_t *r, const char *box, const char *calib_path, bool busy_start, const char *key_sigma2,
                   char **out, err_t *e);

#endif
