/* fathom — Fathom as a method: 4-bit keys as bit planes, each query's plan (models/fathom.h) reading
 * b_c planes of channel c (Σ_c b_c·n_off/8 + active·n_off/32 bytes per layer and KV head) at the
 * plane-bit budget whose mean reads meet the budget, then k rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "models/methods/builtin.h"

static const char *const forms[] = {"v1", "v2", "qh", NULL};

/* The planner's statistics over plans shared by the G query heads of a KV head, at the plane bits
 * asked for or at the largest whose mean reads meet the budget. */
static int resolve(const method_cfg_t *c, const llm_t *m, double kv_bytes, method_index_t *ix, err_t *e)
{
    int ch = m->head_dim, group = (int)llm_group(m);
    if (c->plane_bits > 0 && c->budget_bits > 0)
        return err_set(e, ERR_INVAL, "fathom: give budget (%g) or plane_bits (%lld), not both: the budget follows from the plane bits",
                       c->budget_bits, (long long)c->plane_bits);
    if (c->plane_bits > FATHOM_MAX_BITS * ch)
        return err_set(e, ERR_RANGE, "fathom: plane_bits %lld exceeds %d channels of %d planes", (long long)c->plane_bits, ch,
                       FATHOM_MAX_BITS);
    ix->stored_bits = (4.0 + FATHOM_SCALE_BITS) * m->head_dim;
    ix->planes = ix->planned = true;
    double *s2 = malloc((size_t)ch * sizeof *s2);
    if (!s2) return err_set(e, ERR_NOMEM, "method: out of memory");
    int rc = ERR_OK;
    if (c->n_key_variances == ch) memcpy(s2, c->key_variances, (size_t)ch * sizeof *s2);
    else rc = fathom_profile_default(ch, s2, e);
    if (!rc && c->plane_bits > 0)
        rc = fathom_stats(s2, ch, group, (int)c->plane_bits, (int)c->queries, (uint64_t)c->seed, &ix->fs, e);
    else if (!rc)
        rc = fathom_plane_budget(s2, ch, group, c->budget_bits > 0 ? c->budget_bits : FATHOM_DEFAULT_BUDGET_BITS, (int)c->queries,
                                 (uint64_t)c->seed, &ix->fs, e);
    free(s2);
    if (rc) return rc;
    ix->budget_bits = ix->fs.mean_read_bits;  /* what the plane budget reads on average */
    if (c->plane_bits <= 0) ix->asked_bits = c->budget_bits > 0 ? c->budget_bits : FATHOM_DEFAULT_BUDGET_BITS;
    return ERR_OK;
}

/* decode: the planes past the first t of each channel the plan touches, chunk by chunk (chunked:
 * a channel's prefix per chunk) or plane by plane (contiguous: a run per plane, and per channel its
 * scales when t = 0); a prefill chunk: every channel's */
static double index_pieces(const method_index_t *ix, const method_cfg_t *c, const llm_t *m, double n_off, int t,
                           bool prefill)
{
    bool contiguous = c->index_layout == INDEX_CONTIGUOUS;
    if (prefill) return contiguous ? method_plane_pieces(m->head_dim, t) : m->head_dim * ceil(n_off / (double)c->chunk);
    double ch = 0, planes = 0, active = 0;
    for (int b = 1; b <= FATHOM_MAX_BITS; b++) {
        active += ix->fs.mean_channels_at[b];
        if (b > t) ch += ix->fs.mean_channels_at[b], planes += (b - t) * ix->fs.mean_channels_at[b];
    }
    if (contiguous) return planes + (t == 0 ? active : 0);
    return ch * ceil(n_off / (double)c->chunk);
}

/* each channel given b bits reads b − t planes past the first t; all of them, scales too, at t = 0 */
static double plane_read_bits(const method_index_t *ix, int t)
{
    double host = 0;
    for (int b = t + 1; b <= FATHOM_MAX_BITS; b++) host += (b - t) * ix->fs.mean_channels_at[b];
    return t == 0 ? ix->budget_bits : host;
}

static double plan_channels(const method_index_t *ix) { return ix->fs.mean_active; }

const method_ops_t method_fathom_ops = {
    .name = "fathom",
    .scan_family = "fathom",
    .scan_forms = forms,
    .query_dependent = true,
    .planner = true,
    .select = SELECT_KV_HEAD,
    .layout = LAYOUT_INTERLEAVED,
    .index_fetch = FETCH_SM,
    .resolve = resolve,
    .index_pieces = index_pieces,
    .plane_read_bits = plane_read_bits,
    .plan_channels = plan_channels,
};
