/* fathom — the Fathom planner: per-query reverse water-filling of bit planes over key channels.
 *
 * Keys are quantised to 4 bits per channel (fp16 scale per 64-token block) and stored as 4 bit planes
 * per channel, MSB first, so reading a channel's first b planes is a b-bit quantiser. For a query q,
 * channel j carries w_j = q_j²·σ_j² of the score variance (σ_j² the key's calibrated variance); with
 * b bits its residual error is w_j·4^−b. Under a plane-bit budget P (Σ b_j ≤ P, 0 ≤ b_j ≤ max_bits)
 * the planner minimises Σ w_j·4^−b_j. The marginal gain of a channel's next bit, 0.75·w_j·4^−b,
 * falls geometrically, so taking the largest gains first is exact (tests check it against brute force).
 *
 * The method's budget counts scales: a channel's first bit brings its fp16 scale per 64 tokens
 * (0.25 bit per token), so reads per token are P + 0.25·(active channels); fathom_plane_budget picks
 * the largest P whose mean reads meet the method's budget.
 *
 * Statistical mode: queries drawn with q_j ~ N(0, 1) (GSL RNG, seeded) against a channel-variance
 * profile give the distribution of active channels (the G query heads of a KV head share one plan, so
 * a plan's weights are w_j = σ_j²·Σ_g q_gj²), the bits per token read, the planes read by depth,
 * and the expected relative residual score error Σ w_j 4^−b_j / Σ w_j.
 *
 * Default profile (fathom_profile_default): σ_j² log-normal across channels, σ_j² =
 * exp(2·s·Φ⁻¹((j + ½)/C)) with s = FATHOM_DEFAULT_LOG_SD, and every (C/FATHOM_DEFAULT_OUTLIERS)-th
 * channel an outlier multiplied by FATHOM_DEFAULT_OUTLIER_FACTOR: the heavy-tailed shape of RoPE'd
 * key channels with a few massive-activation channels. Origin: chosen (not fitted) so that 48 plane
 * bits touch 30–34 of 128 channels on average, as published for Qwen3-8B keys (DESIGN.md); replace it
 * with a measured profile when one exists (method key key_variances: a measured run's CSV header
 * gives its keys' variances as data). */
#ifndef ODSIM_MODELS_FATHOM_H
#define ODSIM_MODELS_FATHOM_H

#include <stdint.h>
#include "common/err.h"

#define FATHOM_MAX_BITS 4
#define FATHOM_DEFAULT_BUDGET_BITS 56.0   /* the paper's headline budget, scales included */
#define FATHOM_SCALE_BITS 0.25   /* fp16 scale per 64 tokens, per token */
#define FATHOM_DEFAULT_LOG_SD 0.75
#define FATHOM_DEFAULT_OUTLIERS 8
#define FATHOM_DEFAULT_OUTLIER_FACTOR 16.0

/* Allocates bits[0..n) (each 0..max_bits, Σ ≤ plane_bits) minimising Σ w_j·4^−bits_j, greedily on
 * marginal gain (ties to the lower channel). w_j ≥ 0. Errors: ERR_INVAL (n < 1, max_bits outside
 * 1..8, negative or non-finite weight, plane_bits < 0). */
int fathom_allocate(const double *w, int n, int plane_bits, int max_bits, uint8_t *bits, err_t *e);

/* Σ w_j·4^−bits_j. */
double fathom_residual(const double *w, const uint8_t *bits, int n);

/* Fills sigma2[0..channels) with the default profile. Errors: ERR_INVAL (channels < 1). */
int fathom_profile_default(int channels, double *sigma2, err_t *e);

typedef struct fathom_stats {
    int plane_bits;
    double mean_active, sd_active;     /* channels with ≥ 1 bit */
    int min_active, max_active;
    double mean_channels_at[FATHOM_MAX_BITS + 1]; /* mean channels given exactly b bits, b = 0..4 */
    double mean_read_bits;             /* plane bits + 0.25·active, per token per KV head */
    double mean_rel_residual;          /* Σ w 4^−b / Σ w */
} fathom_stats_t;

/* Statistics over `queries` random plans at a plane-bit budget, each shared by `group` query heads
 * (q_gj ~ N(0,1), GSL mt19937 seeded with seed). Results are memoised per process by all inputs (the
 * profile compared bit for bit). Not thread-safe. Errors: ERR_INVAL, ERR_NOMEM. */
int fathom_stats(const double *sigma2, int channels, int group, int plane_bits, int queries, uint64_t seed,
                 fathom_stats_t *out, err_t *e);

/* The largest plane-bit budget whose mean reads (plane bits + scales) are ≤ budget_bits for plans
 * shared by `group` query heads, and its statistics. Errors: ERR_RANGE (budget below the reads of one
 * plane bit), ERR_INVAL, ERR_NOMEM. */
int fathom_plane_budget(const double *sigma2, int channels, int group, double budget_bits, int queries,
                        uint64_t seed, fathom_stats_t *out, err_t *e);

#endif
