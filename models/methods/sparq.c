/* sparq — SparQ as a method: r channels of each key at full depth, chosen per query (r = budget/4.25
 * from 4-bit planes with their scales: r·(n_off/2 + n_off/32) bytes per layer and KV head; or bf16
 * channel-major, r = budget/16: r·2·n_off), then k rows. */
#include <math.h>
#include "models/methods/builtin.h"

static int resolve(const method_cfg_t *c, const llm_t *m, double kv_bytes, method_index_t *ix, err_t *e)
{
    double d = m->head_dim;
    double per = c->store == STORE_4BIT ? 4.0 + FATHOM_SCALE_BITS : 16.0;
    ix->budget_bits = c->budget_bits > 0 ? c->budget_bits : (c->store == STORE_4BIT ? 136 : 16 * 16);
    double r = ix->budget_bits / per;
    if (fabs(r - round(r)) > 1e-9 || r < 1 || r > d)
        return err_set(e, ERR_INVAL, "sparq %s reads %g bits per channel: budget %g gives r = %g channels; use a multiple of %g up to %g",
                       method_store_names[c->store], per, ix->budget_bits, r, per, per * d);
    ix->channels = (int)round(r);
    ix->stored_bits = per * d;
    ix->planes = c->store == STORE_4BIT;
    return ERR_OK;
}

/* decode: each chosen channel's planes, chunk by chunk (chunked) or a run per plane and one for the
 * channel's scales (contiguous; bf16: a run per channel); a prefill chunk: every channel's */
static double index_pieces(const method_index_t *ix, const method_cfg_t *c, const llm_t *m, double n_off, int t,
                           bool prefill)
{
    double channels = prefill ? m->head_dim : ix->channels;
    if (c->index_layout != INDEX_CONTIGUOUS) return channels * ceil(n_off / (double)c->chunk);
    return ix->planes ? method_plane_pieces(channels, t) : channels;
}

static double plane_read_bits(const method_index_t *ix, int t) { return method_plane_bits(ix->channels, t); }

static double plan_channels(const method_index_t *ix) { return ix->budget_bits / 4.25; }

const method_ops_t method_sparq_ops = {
    .name = "sparq",
    .scan_family = "sparq",
    .query_dependent = true,
    .select = SELECT_KV_HEAD,
    .layout = LAYOUT_INTERLEAVED,
    .index_fetch = FETCH_SM,
    .resolve = resolve,
    .index_pieces = index_pieces,
    .plane_read_bits = plane_read_bits,
    .plan_channels = plan_channels,
};
