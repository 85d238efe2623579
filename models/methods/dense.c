/* dense — exact attention as a method: no index, every offloaded K and V row read each step
 * (2·d·e·n_off bytes per layer and KV head). */
#include "models/methods/builtin.h"

static int resolve(const method_cfg_t *c, const llm_t *m, double kv_bytes, method_index_t *ix, err_t *e)
{
    if (c->budget_bits != 0) return err_set(e, ERR_INVAL, "dense reads no index: budget must be 0, got %g", c->budget_bits);
    return ERR_OK;
}

const method_ops_t method_dense_ops = {
    .name = "dense",
    .reads_all = true,
    .budget_fixed = true,
    .select = SELECT_KV_HEAD,
    .layout = LAYOUT_INTERLEAVED,
    .index_fetch = FETCH_CE,
    .resolve = resolve,
};
