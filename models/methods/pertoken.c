/* pertoken — a compressed key per token as a method: b bits per token per KV head (presets 136 and
 * 68), read as one run of b·n_off/8 bytes per layer and KV head, then k rows. */
#include "models/methods/builtin.h"

static int resolve(const method_cfg_t *c, const llm_t *m, double kv_bytes, method_index_t *ix, err_t *e)
{
    double d = m->head_dim;
    ix->budget_bits = ix->stored_bits = c->budget_bits > 0 ? c->budget_bits : 136;
    if (ix->budget_bits > 16 * d)
        return err_set(e, ERR_RANGE, "pertoken budget %g exceeds a bf16 key (%g bits)", ix->budget_bits, 16 * d);
    return ERR_OK;
}

static double index_pieces(const method_index_t *ix, const method_cfg_t *c, const llm_t *m, double n_off, int t,
                           bool prefill)
{
    return 1;
}

const method_ops_t method_pertoken_ops = {
    .name = "pertoken",
    .scan_family = "pertoken",
    .select = SELECT_KV_HEAD,
    .layout = LAYOUT_INTERLEAVED,
    .index_fetch = FETCH_CE,
    .resolve = resolve,
    .index_pieces = index_pieces,
};
