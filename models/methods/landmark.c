/* landmark — Quest-like page selection as a method: per page of P tokens its min and max keys
 * ((n_off/P)·2·d·e bytes per layer and KV head, one run), then k/P whole pages of P·2·d·e bytes. */
#include "models/methods/builtin.h"

static int resolve(const method_cfg_t *c, const llm_t *m, double kv_bytes, method_index_t *ix, err_t *e)
{
    if (c->k < c->page)
        return err_set(e, ERR_INVAL, "landmark: k = %lld selects fewer tokens than one page of %lld", (long long)c->k,
                       (long long)c->page);
    return method_fixed_budget(c, "landmark", 2.0 * m->head_dim * kv_bytes * 8.0 / (double)c->page, " and page", ix, e);
}

static double index_pieces(const method_index_t *ix, const method_cfg_t *c, const llm_t *m, double n_off, int t,
                           bool prefill)
{
    return 1;
}

const method_ops_t method_landmark_ops = {
    .name = "landmark",
    .scan_family = "landmark",
    .pages = true,
    .budget_fixed = true,
    .select = SELECT_KV_HEAD,
    .layout = LAYOUT_PAGE,
    .index_fetch = FETCH_CE,
    .resolve = resolve,
    .index_pieces = index_pieces,
};
