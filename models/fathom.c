#include "models/fathom.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Channel a comes before b: larger gain, then lower index (the order a linear scan would pick). */
static int before(const double *gain, int a, int b) { return gain[a] > gain[b] || (gain[a] == gain[b] && a < b); }

static void heap_down(int *h, int n, int i, const double *gain)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(gain, h[l], h[m])) m = l;
        if (r < n && before(gain, h[r], h[m])) m = r;
        if (m == i) return;
        int t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static int allocate(const double *w, int n, int plane_bits, int max_bits, uint8_t *bits, int32_t *picks, int *npicks,
                    err_t *e);

int fathom_allocate(const double *w, int n, int plane_bits, int max_bits, uint8_t *bits, err_t *e)
{
    return allocate(w, n, plane_bits, max_bits, bits, NULL, NULL, e);
}

/* fathom_allocate, also listing the channel of each plane bit in the order given into picks (when not
 * NULL; room for plane_bits) and their count into *npicks: the first P of them are the allocation at
 * P plane bits, since the greedy order does not depend on the budget. */
static int allocate(const double *w, int n, int plane_bits, int max_bits, uint8_t *bits, int32_t *picks, int *npicks,
                    err_t *e)
{
    if (n < 1 || max_bits < 1 || max_bits > 8 || plane_bits < 0)
        return err_set(e, ERR_INVAL, "fathom: bad allocation request (n=%d, max_bits=%d, plane_bits=%d)", n,
                       max_bits, plane_bits);
    for (int j = 0; j < n; j++) {
        if (!(w[j] >= 0) || !isfinite(w[j])) return err_set(e, ERR_INVAL, "fathom: weight %d is %g", j, w[j]);
        bits[j] = 0;
    }
    /* gain[j]: the error the channel's next bit removes, 0.75·w·4^−b. A max-heap of channels by gain
     * (ties to the lower index) gives each plane bit to the best channel in O(log n). */
    double *gain = malloc((size_t)n * sizeof *gain);
    int *heap = malloc((size_t)n * sizeof *heap);
    if (!gain || !heap) {
        free(gain);
        free(heap);
        return err_set(e, ERR_NOMEM, "fathom: out of memory");
    }
    int hn = 0;
    for (int j = 0; j < n; j++) {
        gain[j] = 0.75 * w[j];
        if (gain[j] > 0) heap[hn++] = j;
    }
    for (int i = hn / 2 - 1; i >= 0; i--) heap_down(heap, hn, i, gain);
    int b = 0;
    for (; b < plane_bits && hn > 0; b++) {
        int best = heap[0];
        bits[best]++;
        if (picks) picks[b] = best;
        gain[best] *= 0.25;
        if (bits[best] >= max_bits || !(gain[best] > 0)) heap[0] = heap[--hn];
        heap_down(heap, hn, 0, gain);
    }
    if (npicks) *npicks = b;
    free(gain);
    free(heap);
    return ERR_OK;
}

double fathom_residual(const double *w, const uint8_t *bits, int n)
{
    double quarter[9];  /* pow's own values, so the sum is the same as calling it per channel */
    for (int b = 0; b < 9; b++) quarter[b] = pow(0.25, b);
    double r = 0;
    for (int j = 0; j < n; j++) r += w[j] * (bits[j] < 9 ? quarter[bits[j]] : pow(0.25, bits[j]));
    return r;
}

int fathom_profile_default(int channels, double *sigma2, err_t *e)
{
    if (channels < 1) return err_set(e, ERR_INVAL, "fathom: %d channels", channels);
    int every = channels / FATHOM_DEFAULT_OUTLIERS;
    if (every < 1) every = 1;
    for (int j = 0; j < channels; j++) {
        double z = gsl_cdf_ugaussian_Pinv((j + 0.5) / channels);
        sigma2[j] = exp(2.0 * FATHOM_DEFAULT_LOG_SD * z);
        if (j % every == every / 2) sigma2[j] *= FATHOM_DEFAULT_OUTLIER_FACTOR;
    }
    return ERR_OK;
}

/* Memo of fathom_stats: its result is a pure function of its inputs, and a run resolves its method
 * (and a capacity search its points) many times over a few distinct inputs. Profiles of up to
 * MEMO_CHANNELS channels are kept, MEMO_SLOTS results, replaced round-robin. */
#define MEMO_SLOTS 64
#define MEMO_CHANNELS 256

typedef struct memo {
    int used, channels, group, plane_bits, queries;
    uint64_t seed;
    double sigma2[MEMO_CHANNELS];
    fathom_stats_t st;
} memo_t;

static memo_t memo[MEMO_SLOTS];
static int memo_next;

static memo_t *memo_find(const double *sigma2, int channels, int group, int plane_bits, int queries, uint64_t seed)
{
    for (int i = 0; i < MEMO_SLOTS; i++) {
        memo_t *m = &memo[i];
        if (m->used && m->channels == channels && m->group == group && m->plane_bits == plane_bits &&
            m->queries == queries && m->seed == seed && !memcmp(m->sigma2, sigma2, (size_t)channels * sizeof *sigma2))
            return m;
    }
    return NULL;
}

static void memo_put(const double *sigma2, int channels, int group, int plane_bits, int queries, uint64_t seed,
                     const fathom_stats_t *st)
{
    if (channels > MEMO_CHANNELS) return;
    memo_t *m = &memo[memo_next];
    memo_next = (memo_next + 1) % MEMO_SLOTS;
    *m = (memo_t){1, channels, group, plane_bits, queries, seed, {0}, *st};
    memcpy(m->sigma2, sigma2, (size_t)channels * sizeof *sigma2);
}

static int stats_compute(const double *sigma2, int channels, int group, int plane_bits, int queries, uint64_t seed,
                         fathom_stats_t *out, err_t *e);

int fathom_stats(const double *sigma2, int channels, int group, int plane_bits, int queries, uint64_t seed,
                 fathom_stats_t *out, err_t *e)
{
    const memo_t *m = channels <= MEMO_CHANNELS ? memo_find(sigma2, channels, group, plane_bits, queries, seed) : NULL;
    if (m) {
        *out = m->st;
        return ERR_OK;
    }
    int rc = stats_compute(sigma2, channels, group, plane_bits, queries, seed, out, e);
    if (!rc) memo_put(sigma2, channels, group, plane_bits, queries, seed, out);
    return rc;
}

/* The random plans of one (profile, group, queries, seed): each query's weights, their sum and its
 * greedy order of plane bits. They do not depend on the plane-bit budget, so the statistics at every
 * budget a bisection tries come from one set of draws; the last set is kept. */
typedef struct draws {
    int channels, group, queries;
    uint64_t seed;
    double *sigma2;   /* [channels] */
    double *w;        /* [queries][channels] */
    double *tot;      /* [queries] */
    int32_t *picks;   /* [queries][FATHOM_MAX_BITS·channels], channels in the order given bits */
    int *npicks;      /* [queries] */
} draws_t;

static draws_t draws;

static void draws_clear(draws_t *d)
{
    free(d->sigma2);
    free(d->w);
    free(d->tot);
    free(d->picks);
    free(d->npicks);
    memset(d, 0, sizeof *d);
}

/* Points *out to the draws for these inputs, made now unless they are the kept ones. Returns 0 or the
 * error (ERR_NOMEM, or fathom_allocate's). */
static int draws_get(const double *sigma2, int channels, int group, int queries, uint64_t seed, const draws_t **out,
                     err_t *e)
{
    draws_t *d = &draws;
    *out = d;
    if (d->w && d->channels == channels && d->group == group && d->queries == queries && d->seed == seed &&
        !memcmp(d->sigma2, sigma2, (size_t)channels * sizeof *sigma2))
        return ERR_OK;
    draws_clear(d);
    size_t nq = (size_t)queries, nc = (size_t)channels, np = (size_t)FATHOM_MAX_BITS * nc;
    d->sigma2 = malloc(nc * sizeof *d->sigma2);
    d->w = calloc(nq * nc, sizeof *d->w);
    d->tot = malloc(nq * sizeof *d->tot);
    d->picks = malloc(nq * np * sizeof *d->picks);
    d->npicks = malloc(nq * sizeof *d->npicks);
    uint8_t *bits = malloc(nc);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    int rc = (d->sigma2 && d->w && d->tot && d->picks && d->npicks && bits && rng)
                 ? ERR_OK : err_set(e, ERR_NOMEM, "fathom: out of memory");
    if (!rc) {
        memcpy(d->sigma2, sigma2, nc * sizeof *sigma2);
        gsl_rng_set(rng, (unsigned long)seed);
    }
    for (int q = 0; !rc && q < queries; q++) {
        double *w = d->w + (size_t)q * nc, tot = 0;
        for (int g = 0; g < group; g++)   /* the group's query heads share the plan: their weights add */
            for (int j = 0; j < channels; j++) {
                double z = gsl_ran_gaussian_ziggurat(rng, 1.0);
                w[j] += z * z * sigma2[j];
            }
        for (int j = 0; j < channels; j++) tot += w[j];
        d->tot[q] = tot;
        rc = allocate(w, channels, (int)np, FATHOM_MAX_BITS, bits, d->picks + (size_t)q * np, &d->npicks[q], e);
    }
    gsl_rng_free(rng);
    free(bits);
    if (rc) {
        draws_clear(d);
        return rc;
    }
    d->channels = channels;
    d->group = group;
    d->queries = queries;
    d->seed = seed;
    return ERR_OK;
}

static int stats_compute(const double *sigma2, int channels, int group, int plane_bits, int queries, uint64_t seed,
                         fathom_stats_t *out, err_t *e)
{
    if (channels < 1 || group < 1 || queries < 1 || plane_bits < 0)
        return err_set(e, ERR_INVAL,
                       "fathom: bad statistics request (channels=%d, group=%d, queries=%d, plane_bits=%d)",
                       channels, group, queries, plane_bits);
    const draws_t *d;
    int rc = draws_get(sigma2, channels, group, queries, seed, &d, e);
    if (rc) return rc;
    uint8_t *bits = malloc((size_t)channels);
    if (!bits) return err_set(e, ERR_NOMEM, "fathom: out of memory");
    memset(out, 0, sizeof *out);
    out->plane_bits = plane_bits;
    out->min_active = channels;
    double s_act = 0, s_act2 = 0, s_res = 0;
    size_t np = (size_t)FATHOM_MAX_BITS * (size_t)channels;
    for (int q = 0; q < queries; q++) {
        const double *w = d->w + (size_t)q * (size_t)channels;
        const int32_t *picks = d->picks + (size_t)q * np;
        int given = d->npicks[q] < plane_bits ? d->npicks[q] : plane_bits;
        memset(bits, 0, (size_t)channels);
        for (int k = 0; k < given; k++) bits[picks[k]]++;
        int act = 0;
        for (int j = 0; j < channels; j++) {
            act += bits[j] > 0;
            out->mean_channels_at[bits[j]] += 1.0;
        }
        s_act += act;
        s_act2 += (double)act * act;
        if (act < out->min_active) out->min_active = act;
        if (act > out->max_active) out->max_active = act;
        s_res += d->tot[q] > 0 ? fathom_residual(w, bits, channels) / d->tot[q] : 0;
    }
    out->mean_active = s_act / queries;
    double var = s_act2 / queries - out->mean_active * out->mean_active;
    out->sd_active = var > 0 ? sqrt(var) : 0;
    for (int b = 0; b <= FATHOM_MAX_BITS; b++) out->mean_channels_at[b] /= queries;
    double planes = 0;
    for (int b = 1; b <= FATHOM_MAX_BITS; b++) planes += b * out->mean_channels_at[b];
    out->mean_read_bits = planes + FATHOM_SCALE_BITS * out->mean_active;
    out->mean_rel_residual = s_res / queries;
    free(bits);
    return ERR_OK;
}

int fathom_plane_budget(const double *sigma2, int channels, int group, double budget_bits, int queries,
                        uint64_t seed, fathom_stats_t *out, err_t *e)
{
    int lo = 0, hi = FATHOM_MAX_BITS * channels;
    fathom_stats_t st;
    int rc = fathom_stats(sigma2, channels, group, 1, queries, seed, &st, e);
    if (rc) return rc;
    if (st.mean_read_bits > budget_bits)
        return err_set(e, ERR_RANGE, "fathom: budget %g bits is below one plane bit and its scale (%g)", budget_bits,
                       st.mean_read_bits);
    lo = 1;
    *out = st;
    /* reads grow with the plane budget: bisect for the largest one within budget */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        rc = fathom_stats(sigma2, channels, group, mid, queries, seed, &st, e);
        if (rc) return rc;
        if (st.mean_read_bits <= budget_bits + 1e-9) {
            lo = mid;
            *out = st;
        } else {
            hi = mid - 1;
        }
    }
    return ERR_OK;
}
