/* kvsynth — synthetic keys, queries and values for odsim's quality estimates (`odsim quality`).
 *
 * One (layer, KV head) at a time, deterministic for (seed, layer, head) alone (GSL mt19937 seeded
 * from them), so any subset of heads can be drawn in any order. The statistics, all declared with
 * their defaults in `odsim params quality`:
 *  - channel variance profile: σ_j² of models/fathom.h's fathom_profile_default (log-normal across
 *    channels, log-sd 0.75, every 16th of 128 channels an outlier ×16);
 *  - per-layer variation: in each (layer, KV head) channel j's standard deviation is multiplied by
 *    exp(layer_log_sd · z), z ~ N(0, 1) drawn per layer, head and channel;
 *  - keys: k̃_t = σ ⊙ x_t, zero mean, x_t = φ x_{t−1} + √(1−φ²) ε_t with ε_t ~ N(0, I) and
 *    φ = token_corr (locality between neighbouring tokens; 0 by default: every token a priori alike,
 *    no attention sink, no recency);
 *  - rotary structure: k_t = R(t) k̃_t, channels j and j + d/2 rotating by t·θ_j, θ_j =
 *    rope_base^(−2j/d) (the rotate-half convention); queries at position n (the next token) likewise;
 *  - queries: group query heads per KV head (GQA) and `steps` decode steps; head h of step s is
 *    σ_q ⊙ (√ρ a_s + √(1−ρ) b_sh), a and b ~ N(0, I), ρ = group_corr, σ_qj = σ_j^query_align
 *    (0: isotropic queries, as fathom_stats draws them), scaled so that the logits q·k/√d of a query
 *    have standard deviation score_sd across tokens in expectation (the attention's sharpness);
 *  - values: v_t ~ N(0, I), independent of the keys.
 * Origin: chosen, not fitted: the profile is the planner's default (chosen so that 48 plane bits
 * touch 30–34 of 128 channels, as published for Qwen3-8B); score_sd 2.5 is an assumption. */
#ifndef ODSIM_VALIDATION_KVSYNTH_H
#define ODSIM_VALIDATION_KVSYNTH_H

#include <stdint.h>
#include <stdio.h>
#include "common/cfg.h"
#include "common/err.h"

typedef struct kvsynth_params {
    int64_t seed;
    int64_t head_dim;
    int64_t tokens;
    int64_t layers;
    int64_t kv_heads;
    int64_t group;
    int64_t steps;
    double rope_base;
    double layer_log_sd;
    double token_corr;
    double group_corr;
    double query_align;
    double score_sd;
} kvsynth_params_t;

/* Binds map (the parameters, or NULL for all defaults) into *p; unknown keys and values out of range
 * are errors naming file:line:col and key. head_dim must be even. Errors: ERR_INVAL, ERR_RANGE. */
int kvsynth_bind(const cfg_node_t *map, kvsynth_params_t *p, err_t *e);

/* Writes the parameter table (key, type, default, range, meaning) for `odsim params`. */
void kvsynth_describe(FILE *fp);

/* One line naming every parameter's value, for the estimates' first line. */
void kvsynth_summary(const kvsynth_params_t *p, char *buf, size_t size);

/* Draws (layer, head): k and v tokens × head_dim floats, q steps × group × head_dim floats (row
 * (s·group + h)), raw (the caller folds 1/√d into q). Errors: ERR_INVAL (layer or head out of range),
 * ERR_NOMEM. */
int kvsynth_head(const kvsynth_params_t *p, int layer, int head, float *k, float *q, float *v, err_t *e);

#endif
