/* kvsynth — synthetic keys, queries and values with declared statistics (see kvsynth.h). */
#include "validation/kvsynth.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "models/fathom.h"

#define P(k, t, f, d, lo, hi, doc) {k, t, offsetof(kvsynth_params_t, f), d, lo, hi, NULL, doc}
static const cfg_param_t table[] = {
    P("seed", CFG_T_INT, seed, "1", 0, 4294967295.0, "RNG seed; each (layer, KV head) is drawn from it alone"),
    P("head_dim", CFG_T_INT, head_dim, "128", 2, 128, "channels per key (even: RoPE pairs)"),
    P("tokens", CFG_T_INT, tokens, "4096", 16, 1e7, "keys per KV head (the context), tokens"),
    P("layers", CFG_T_INT, layers, "4", 1, 1024, "layers drawn, each with its own profile variation"),
    P("kv_heads", CFG_T_INT, kv_heads, "2", 1, 1024, "KV heads drawn per layer"),
    P("group", CFG_T_INT, group, "4", 1, 64, "query heads per KV head (GQA group; Qwen3-8B: 32 / 8 = 4)"),
    P("steps", CFG_T_INT, steps, "8", 1, 1e5, "decode steps (query groups) per KV head"),
    P("rope_base", CFG_T_DOUBLE, rope_base, "1e6", 1, 1e12, "RoPE base: pair j rotates by position x base^(-2j/d) radians"),
    P("layer_log_sd", CFG_T_DOUBLE, layer_log_sd, "0.25", 0, 5,
      "per-layer variation: sd of the log of each channel's scale factor, per layer and KV head"),
    P("token_corr", CFG_T_DOUBLE, token_corr, "0", 0, 0.999,
      "correlation of neighbouring tokens' keys before RoPE (AR(1) per channel): the locality pages use"),
    P("group_corr", CFG_T_DOUBLE, group_corr, "0.5", 0, 1, "correlation of a step's query heads within a group"),
    P("query_align", CFG_T_DOUBLE, query_align, "0", 0, 2,
      "query channel sd = key channel sd ^ query_align (0: isotropic queries, as the planner assumes)"),
    P("score_sd", CFG_T_DOUBLE, score_sd, "2.5", 0.01, 100,
      "sd across tokens of a query's logits q.k/sqrt(d), in expectation: the attention's sharpness"),
};
#undef P
#define N_PARAMS (sizeof table / sizeof table[0])

int kvsynth_bind(const cfg_node_t *map, kvsynth_params_t *p, err_t *e)
{
    int rc = cfg_bind(map, table, N_PARAMS, p, e);
    if (!rc && p->head_dim % 2)
        return err_set(e, ERR_INVAL, "quality synthetic: head_dim %lld is odd (RoPE rotates channel pairs)",
                       (long long)p->head_dim);
    return rc;
}

void kvsynth_describe(FILE *fp) { cfg_params_describe(fp, "quality synthetic keys", table, N_PARAMS); }

void kvsynth_summary(const kvsynth_params_t *p, char *buf, size_t size)
{
    snprintf(buf, size,
             "d=%lld, %lld tokens, %lld layers x %lld KV heads, group %lld, %lld steps; channel variance "
             "log-normal sd %.2f with outliers x%g every %lld channels, layer_log_sd %g, token_corr %g, RoPE base %g, "
             "group_corr %g, query_align %g, score_sd %g; values N(0,1); seed %lld",
             (long long)p->head_dim, (long long)p->tokens, (long long)p->layers, (long long)p->kv_heads,
             (long long)p->group, (long long)p->steps, FATHOM_DEFAULT_LOG_SD, FATHOM_DEFAULT_OUTLIER_FACTOR,
             (long long)(p->head_dim / FATHOM_DEFAULT_OUTLIERS > 0 ? p->head_dim / FATHOM_DEFAULT_OUTLIERS : 1),
             p->layer_log_sd, p->token_corr, p->rope_base, p->group_corr, p->query_align, p->score_sd, (long long)p->seed);
}

/* Rotates x (d floats) in place to position pos: pairs (j, j + d/2). */
static void rope(float *x, int d, double pos, double base)
{
    for (int j = 0; j < d / 2; j++) {
        double a = pos * pow(base, -2.0 * j / d), c = cos(a), s = sin(a);
        double x0 = x[j], x1 = x[j + d / 2];
        x[j] = (float)(x0 * c - x1 * s);
        x[j + d / 2] = (float)(x0 * s + x1 * c);
    }
}

int kvsynth_head(const kvsynth_params_t *p, int layer, int head, float *k, float *q, float *v, err_t *e)
{
    if (layer < 0 || layer >= p->layers || head < 0 || head >= p->kv_heads)
        return err_set(e, ERR_INVAL, "quality synthetic: no layer %d KV head %d (%lld x %lld)", layer, head,
                       (long long)p->layers, (long long)p->kv_heads);
    int d = (int)p->head_dim, G = (int)p->group;
    size_t n = (size_t)p->tokens;
    double s2[128], sd[128], sq[128], post[128];
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (!r) return err_set(e, ERR_NOMEM, "quality synthetic: out of memory");
    gsl_rng_set(r, (unsigned long)((uint64_t)p->seed * 1000003u + (uint64_t)layer * 65537u + (uint64_t)head));
    int rc = fathom_profile_default(d, s2, e);
    for (int j = 0; !rc && j < d; j++) {
        sd[j] = sqrt(s2[j]) * exp(p->layer_log_sd * gsl_ran_gaussian_ziggurat(r, 1.0));
        sq[j] = pow(sd[j], p->query_align);
    }
    /* RoPE mixes a pair's two channels: over positions each carries their mean variance */
    for (int j = 0; !rc && j < d; j++) {
        int o = j < d / 2 ? j + d / 2 : j - d / 2;
        post[j] = 0.5 * (sd[j] * sd[j] + sd[o] * sd[o]);
    }
    double x[128], phi = p->token_corr, innov = sqrt(1 - phi * phi);
    for (size_t t = 0; !rc && t < n; t++) {
        for (int j = 0; j < d; j++) {
            double z = gsl_ran_gaussian_ziggurat(r, 1.0);
            x[j] = t ? phi * x[j] + innov * z : z;   /* stationary AR(1): variance 1 at every t */
            k[t * d + j] = (float)(sd[j] * x[j]);
            v[t * d + j] = (float)gsl_ran_gaussian_ziggurat(r, 1.0);
        }
        rope(k + t * d, d, (double)t, p->rope_base);
    }
    /* E[var over tokens of q.k] = sum_j sq_j^2 post_j, for the unscaled query */
    double spread = 0;
    for (int j = 0; j < d; j++) spread += sq[j] * sq[j] * post[j];
    double scale = p->score_sd * sqrt((double)d) / sqrt(spread), rho = p->group_corr;
    for (int s = 0; !rc && s < p->steps; s++) {
        double a[128];
        for (int j = 0; j < d; j++) a[j] = gsl_ran_gaussian_ziggurat(r, 1.0);
        for (int h = 0; h < G; h++) {
            float *qh = q + ((size_t)s * G + h) * d;
            for (int j = 0; j < d; j++)
                qh[j] = (float)(scale * sq[j] * (sqrt(rho) * a[j] + sqrt(1 - rho) * gsl_ran_gaussian_ziggurat(r, 1.0)));
            rope(qh, d, (double)n, p->rope_base);
        }
    }
    gsl_rng_free(r);
    return rc;
}
