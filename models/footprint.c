#include "models/footprint.h"

#include <math.h>
#include <string.h>
#include "models/method_ops.h"

void footprint_session(const method_t *mt, uint64_t context, footprint_t *o)
{
    const method_cfg_t *c = method_cfg(mt);
    const llm_t *m = method_llm(mt);
    double H = m->kv_heads, d = m->head_dim, W = (double)c->window;
    double n_off = method_offloaded_tokens(mt, context), span = method_index_span_tokens(mt, n_off);
    memset(o, 0, sizeof *o);
    double row = method_table(mt)->reads_all ? 2.0 * d * llm_dtype_bytes((llm_dtype_t)c->kv_dtype) : method_kv_row_bytes(mt);
    double kv_bytes = n_off * m->layers * H * row;
    o->host_kv_bytes = c->kv_placement == KV_HBM ? 0 : kv_bytes;
    double buf_max = 0;
    for (int l = 0; l < m->layers; l++) {
        double hb, bb;
        method_index_split(mt, l, &hb, &bb);
        o->host_index_bytes += hb * span * H / 8.0;   /* a contiguous index's reservation */
        o->hbm_index_bytes += bb * n_off * H / 8.0;
        method_layer_t ly;
        method_layer(mt, l, context, 1, false, &ly);
        double b = (ly.index_host_bytes + ly.kv_host_bytes + ly.winner_host_bytes) * (double)(c->prefetch + 1) +
                   ly.scores * 4.0;
        if (b > buf_max) buf_max = b;
    }
    o->host_bytes = o->host_kv_bytes + o->host_index_bytes;
    /* the window, or the open chunk's buffer of T tokens (bf16) where the window is smaller */
    o->hbm_tail_bytes = fmax(fmin((double)context, W), (double)c->chunk) * m->layers * H * 2.0 * d * 2.0;
    o->hbm_buffer_bytes = buf_max;
    o->hbm_bytes = o->hbm_index_bytes + o->hbm_tail_bytes + o->hbm_buffer_bytes + (c->kv_placement == KV_HBM ? kv_bytes : 0);
    o->hbm_weight_bytes = llm_weight_bytes(m, (llm_dtype_t)c->weight_dtype);
}

static double gib(double b) { return b / 1073741824.0; }

int footprint_check(const method_t *mt, const hw_t *hw, uint64_t context, int sessions, footprint_total_t *o,
                    err_t *e)
{
    const method_cfg_t *c = method_cfg(mt);
    footprint_t f;
    footprint_session(mt, context, &f);
    memset(o, 0, sizeof *o);
    o->sessions = sessions;
    o->sessions_per_gpu = (sessions + hw->gpus - 1) / hw->gpus;
    o->host_bytes = f.host_bytes * sessions;
    bool cxl = c->tier == TIER_CXL;
    if (cxl && !hw->tier) return err_set(e, ERR_INVAL, "tier cxl: box '%s' has no memory tier", hw->box);
    o->host_capacity_bytes = cxl ? hw->cxl_bytes : hw->host_dram_bytes;
    o->hbm_bytes_per_gpu = f.hbm_weight_bytes + f.hbm_bytes * o->sessions_per_gpu;
    o->hbm_capacity_bytes = hw->hbm_bytes - hw->hbm_reserve_bytes;
    if (o->host_bytes > o->host_capacity_bytes)
        return err_set(e, ERR_INFEASIBLE,
                       "infeasible: %d session(s) of %llu tokens need %.2f GiB of %s (%.2f GiB each: K/V %.2f + index %.2f), the box '%s' has %.2f GiB",
                       sessions, (unsigned long long)context, gib(o->host_bytes), cxl ? "the CXL tier" : "host DRAM",
                       gib(f.host_bytes), gib(f.host_kv_bytes), gib(f.host_index_bytes), hw->box, gib(o->host_capacity_bytes));
    /* weights leaving less than this share of usable HBM leave no room for prefill activations,
     * workspaces and the CUDA context, which odsim does not count (assumed rule, not measured) */
    if (f.hbm_weight_bytes > (1.0 - FOOTPRINT_MIN_FREE_HBM) * o->hbm_capacity_bytes)
        return err_set(e, ERR_INFEASIBLE,
                       "infeasible: the weights (%.2f GiB) leave %.1f%% of a %s's %.2f GiB usable HBM; odsim needs %.0f%% free for "
                       "activations and workspaces (assumed): use weight_dtype fp8 or a GPU with more HBM (odsim does not shard weights)",
                       gib(f.hbm_weight_bytes), 100 * (1 - f.hbm_weight_bytes / o->hbm_capacity_bytes), hw->gpu,
                       gib(o->hbm_capacity_bytes), 100 * FOOTPRINT_MIN_FREE_HBM);
    if (o->hbm_bytes_per_gpu > o->hbm_capacity_bytes)
        return err_set(e, ERR_INFEASIBLE,
                       "infeasible: a %s needs %.2f GiB of HBM (weights %.2f + %d session(s) x %.2f: index %.2f, window %.2f, buffers %.2f), it has %.2f GiB usable (%.2f - %.2f reserved)",
                       hw->gpu, gib(o->hbm_bytes_per_gpu), gib(f.hbm_weight_bytes), o->sessions_per_gpu, gib(f.hbm_bytes),
                       gib(f.hbm_index_bytes), gib(f.hbm_tail_bytes), gib(f.hbm_buffer_bytes), gib(o->hbm_capacity_bytes),
                       gib(hw->hbm_bytes), gib(hw->hbm_reserve_bytes));
    return ERR_OK;
}
