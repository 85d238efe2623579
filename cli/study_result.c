/* A replication's measurements turned into the per-run parts of a study result. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/study_int.h"

static double *dup_doubles(const double *src, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (d && n) memcpy(d, src, n * sizeof *d);
    return d;
}

static int fill_resources(const study_rep_t *rep, study_result_t *r, err_t *e)
{
    size_t n = sim_res_count(rep->sim);
    r->res = calloc(n ? n : 1, sizeof *r->res);
    if (!r->res) return err_set(e, ERR_NOMEM, "out of memory");
    r->n_res = n;
    double best = -1;
    for (size_t i = 0; i < n; i++) {
        study_res_use_t *u = &r->res[i];
        u->name = strdup(sim_res_name(rep->sim, (sim_res_t)i));
        u->unit = strdup(sim_res_unit(rep->sim, (sim_res_t)i));
        if (!u->name || !u->unit) return err_set(e, ERR_NOMEM, "out of memory");
        u->capacity = sim_res_capacity(rep->sim, (sim_res_t)i);
        u->utilisation = sim_res_utilisation(rep->sim, (sim_res_t)i);
        u->work = sim_res_work(rep->sim, (sim_res_t)i);
        if (u->utilisation > best) {
            best = u->utilisation;
            free(r->binding);
            if (!(r->binding = strdup(u->name))) return err_set(e, ERR_NOMEM, "out of memory");
        }
    }
    return ERR_OK;
}

static int fill_lost(const study_rep_t *rep, study_result_t *r, err_t *e)
{
    const exec_stats_t *st = rep->stats;
    size_t nres = sim_res_count(rep->sim);
    r->lost = calloc(st->n_lost, sizeof *r->lost);
    if (!r->lost) return err_set(e, ERR_NOMEM, "out of memory");
    r->n_lost = st->n_lost;
    double plans = st->plans ? (double)st->plans : 1;
    for (size_t i = 0; i < st->n_lost; i++) {
        const char *name = i < nres ? sim_res_name(rep->sim, (sim_res_t)i) : exec_lost_name((int)(i - nres));
        r->lost[i].name = strdup(name);
        if (!r->lost[i].name) return err_set(e, ERR_NOMEM, "out of memory");
        r->lost[i].per_step_s = st->lost_ps[i] / (double)SIM_PS_PER_S / plans;
    }
    r->standalone_step_s = st->standalone_ps_sum / (double)SIM_PS_PER_S / plans;
    return ERR_OK;
}

static void fill_memory(const study_point_t *pt, const study_rep_t *rep, study_result_t *r)
{
    for (size_t i = 0; i < sim_pool_count(rep->sim); i++) {
        const char *name = sim_pool_name(rep->sim, (sim_pool_t)i);
        if (strstr(name, ".hbm_mem")) {
            if (sim_pool_peak(rep->sim, (sim_pool_t)i) > r->hbm_peak_bytes) {
                r->hbm_peak_bytes = sim_pool_peak(rep->sim, (sim_pool_t)i);
                r->hbm_capacity_bytes = sim_pool_capacity(rep->sim, (sim_pool_t)i);
            }
        } else if (!strcmp(name, "host.dram_mem")) {
            r->host_peak_bytes = sim_pool_peak(rep->sim, (sim_pool_t)i);
            r->host_capacity_bytes = sim_pool_capacity(rep->sim, (sim_pool_t)i);
        } else if (!strcmp(name, "cxl.mem")) {
            r->cxl_peak_bytes = sim_pool_peak(rep->sim, (sim_pool_t)i);
            r->cxl_capacity_bytes = sim_pool_capacity(rep->sim, (sim_pool_t)i);
        }
    }
    (void)pt;
}

static int fill_flags(const study_rep_t *rep, study_result_t *r, err_t *e)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    if (!fp) return err_set(e, ERR_NOMEM, "out of memory");
    calib_flags_print(rep->cal, fp);
    fclose(fp);
    r->flags = buf;
    calib_clamp_list(rep->cal, r->clamps, sizeof r->clamps);
    r->calib_hash = calib_hash(rep->cal);
    return ERR_OK;
}

/* On a box of several GPUs: the policy, sessions per GPU, and how many switch uplinks carry them. */
static int fill_placement(const study_point_t *pt, const study_rep_t *rep, study_result_t *r, err_t *e)
{
    int gpus = pt->hw.gpus, per = pt->hw.gpus_per_switch > 1 ? pt->hw.gpus_per_switch : 1;
    if (gpus < 2) return ERR_OK;
    static const char *const names[] = {"spread_uplinks", "pack", "round_robin"};
    size_t cap = 64 + 24 * (size_t)gpus;
    r->placement = malloc(cap);
    if (!r->placement) return err_set(e, ERR_NOMEM, "out of memory");
    int uplinks = (gpus + per - 1) / per, busy = 0;
    size_t at = (size_t)snprintf(r->placement, cap, "%s: sessions per GPU", names[pt->serving.placement]);
    for (int u = 0; u < uplinks; u++) {
        uint64_t on = 0;
        for (int g = u * per; g < gpus && g < (u + 1) * per; g++) {
            on += rep->gpu_sessions[g];
            at += (size_t)snprintf(r->placement + at, cap - at, " %llu", (unsigned long long)rep->gpu_sessions[g]);
        }
        busy += on > 0;
    }
    if (per > 1) snprintf(r->placement + at, cap - at, "; %d of %d switch uplinks carry sessions", busy, uplinks);
    return ERR_OK;
}

int study_result_fill(const study_t *s, const study_point_t *pt, const study_rep_t *rep, study_result_t *r, err_t *e)
{
    (void)s;
    const exec_stats_t *st = rep->stats;
    r->duration_s = rep->measured_s + rep->warmup_s;
    r->decode_tokens = st->decode_tokens;
    r->prefill_tokens = st->prefill_tokens;
    r->sessions = rep->sessions;
    r->turns = st->turns_done;
    r->preemptions = st->preemptions;
    r->evictions = st->evictions;
    r->waiting = st->sessions_waiting;
    /* sessions never admitted count with their waits so far: the quantiles are then lower bounds */
    hist_t *all = hist_new();
    if (all && !hist_merge(all, st->admit_wait_s) && (!st->admit_waiting_s || !hist_merge(all, st->admit_waiting_s))) {
        r->admit_wait_p50_s = hist_count(all) ? hist_quantile(all, 0.5) : NAN;
        r->admit_wait_p99_s = hist_count(all) ? hist_quantile(all, 0.99) : NAN;
    }
    r->admit_never = st->admit_waiting_s ? hist_count(st->admit_waiting_s) : 0;
    hist_free(all);
    double span_ps = r->duration_s * (double)SIM_PS_PER_S;
    r->launch_utilisation = span_ps > 0 && st->launch_threads ? st->launch_busy_ps / span_ps / st->launch_threads : 0;
    fill_memory(pt, rep, r);
    int rc = fill_resources(rep, r, e);
    if (!rc) rc = fill_lost(rep, r, e);
    if (!rc) rc = fill_flags(rep, r, e);
    if (!rc) rc = fill_placement(pt, rep, r, e);
    if (rc) return rc;
    r->n_ctx = rep->n_ctx;
    r->ctx_tokens = dup_doubles(rep->ctx_tokens, rep->n_ctx);
    r->ctx_step_s = dup_doubles(rep->ctx_step_s, rep->n_ctx);
    r->n_util = rep->n_util;
    r->util_t_s = dup_doubles(rep->util_t_s, rep->n_util);
    r->util = dup_doubles(rep->util, rep->n_util * rep->n_res);
    if (!r->ctx_tokens || !r->ctx_step_s || !r->util_t_s || !r->util) return err_set(e, ERR_NOMEM, "out of memory");
    return ERR_OK;
}
