/* hashattn — HashAttention as a method: a 32-bit signature per token and query head (32·G bits per
 * KV head), read as G runs per KV head; each query head selects its own k, so a KV head fetches the
 * union of G sets (u·k rows). */
#include "models/methods/builtin.h"

static int resolve(const method_cfg_t *c, const llm_t *m, double kv_bytes, method_index_t *ix, err_t *e)
{
    return method_fixed_budget(c, "hashattn", 32.0 * llm_group(m), "", ix, e);
}

static double index_pieces(const method_index_t *ix, const method_cfg_t *c, const llm_t *m, double n_off, int t,
                           bool prefill)
{
    return llm_group(m);
}

const method_ops_t method_hashattn_ops = {
    .name = "hashattn",
    .scan_family = "hashattn",
    .budget_fixed = true,
    .select = SELECT_QUERY_HEAD,
    .layout = LAYOUT_INTERLEAVED,
    .index_fetch = FETCH_CE,
    .resolve = resolve,
    .index_pieces = index_pieces,
};
