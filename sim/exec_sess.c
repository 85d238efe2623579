/* exec_sess — a session's turns: their plans built and run one after another, tokens and SLOs
 * counted as they complete. */
#include "sim/exec_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- sessions ------------------------------------------------------------------------------- */

static void step_ready_ev(sim_t *sim, void *arg)
{
    (void)sim;
    exec_sess_next(arg);
}

static void turn_ready_ev(sim_t *sim, void *arg)
{
    (void)sim;
    exec_sess_start_turn(arg);
}

void exec_sess_start_turn(sess_t *s)
{
    exec_t *x = s->x;
    if (s->turn >= s->n_turns) {
        exec_sess_finish(s, false);
        return;
    }
    const exec_turn_t *t = &s->turns[s->turn];
    if (t->restart && s->turn > 0) exec_sess_restart(s, t->context_tokens);
    /* A session's first turn was ready when it arrived: waiting for admission is part of its TTFT. */
    s->t_turn_ready = s->turn == 0 && s->plans == 0 ? s->t_arrive : sim_now(x->sim);
    s->prefill_left = t->prefill_tokens;
    s->decode_left = t->decode_tokens;
    s->first_token_done = false;
    exec_sess_next(s);
}

/* Coarse mode: the last coarse plan still stands for this request (same phase and size, context
 * within the reuse fraction). */
static bool coarse_reusable(const sess_t *s)
{
    const exec_config_t *c = &s->x->cfg;
    if (!c->coarse || !s->have_built || s->built.phase != s->req.phase || s->built.new_tokens != s->req.new_tokens)
        return false;
    double ctx = (double)s->req.context_tokens, was = (double)s->built.context_tokens;
    return fabs(ctx - was) <= c->coarse_reuse * was;
}

/* Builds the session's next plan (memory grown first) into s->plan. */
int exec_sess_build(sess_t *s, err_t *e)
{
    exec_t *x = s->x;
    bool prefill = s->prefill_left > 0;
    uint32_t chunk = exec_next_chunk(s);
    s->req = (plan_request_t){.phase = prefill ? PLAN_PREFILL : PLAN_DECODE, .context_tokens = s->context,
                              .new_tokens = chunk, .step = s->plans};
    if (x->cfg.admission != EXEC_ADMIT_RESERVE) {
        int rc = exec_sess_hold(s, s->context + chunk, e);
        if (rc) return rc;
    }
    if (coarse_reusable(s)) return ERR_OK;
    plan_t *target = x->cfg.coarse ? &s->fine : &s->plan;
    plan_reset(target, s->req.phase, chunk);
    int rc = s->prov.ops->build(s->prov.self, &s->env, &s->req, target, e);
    if (!rc) rc = plan_validate(target, e);
    if (!rc && x->cfg.coarse) rc = plan_coarsen(&s->fine, x->sim, x->cfg.copy_handoff_ps, &s->plan, e);
    s->built = s->req;
    s->have_built = !rc;
    if (rc) return err_prefix(e, "session %llu, plan %llu", (unsigned long long)s->id, (unsigned long long)s->plans);
    return ERR_OK;
}

/* s is ready for its next plan: the policy takes it, or it is built and run alone at once. */
void exec_sess_next(sess_t *s)
{
    exec_t *x = s->x;
    if (x->pol->sess_ready) {
        x->pol->sess_ready(s);
        return;
    }
    err_t e;
    int rc = exec_sess_build(s, &e);
    if (rc == ERR_CAPACITY) {
        exec_sess_blocked(s);
        return;
    }
    if (rc) { exec_fail_err(x, &e); return; }
    s->state = S_RUNNING;
    if ((rc = exec_run_start(x, s->gpu, s->ctx, &s, 1, &e))) exec_fail_err(x, &e);
}

/* The turn that just ended met the SLO: TTFT, and decode rate after the first token. */
static bool turn_meets_slo(const sess_t *s, sim_ps_t now)
{
    const exec_config_t *c = &s->x->cfg;
    double ttft = ps_to_s(s->t_first_token - s->t_turn_ready);
    uint32_t n = s->turns[s->turn].decode_tokens;
    double rest = ps_to_s(now - s->t_first_token);
    double tps = n > 1 && rest > 0 ? (double)(n - 1) / rest : INFINITY;
    return (c->slo_ttft_s <= 0 || ttft <= c->slo_ttft_s) && (c->slo_turn_tps <= 0 || tps >= c->slo_turn_tps);
}

/* A turn still running at `now`: 1 if it meets the SLO so far, 0 if it has already missed it (no
 * first token within slo_ttft_s, or decoding slower than slo_turn_tps), -1 when it is too early to
 * tell. A session not yet admitted waits in its first turn. */
int exec_open_turn_slo(const sess_t *s, sim_ps_t now)
{
    const exec_config_t *c = &s->x->cfg;
    if (s->state == S_DONE || s->state == S_THINKING || s->turn >= s->n_turns) return -1;
    sim_ps_t ready = s->admitted ? s->t_turn_ready : s->t_arrive;
    if (!s->first_token_done)
        return c->slo_ttft_s > 0 && ps_to_s(now - ready) > c->slo_ttft_s ? 0 : -1;
    if (c->slo_ttft_s > 0 && ps_to_s(s->t_first_token - ready) > c->slo_ttft_s) return 0;
    uint32_t done = s->turns[s->turn].decode_tokens - s->decode_left;
    double rest = ps_to_s(now - s->t_first_token);
    if (done < 2 || rest <= 0) return -1;
    return c->slo_turn_tps <= 0 || (double)(done - 1) / rest >= c->slo_turn_tps;
}

/* A plan of s begun at t_begin is done; its latency counts from t_window with latency_from_queue
 * (the session's time in decode, its tokens/s, from t_begin all the same). */
void exec_sess_plan_done(sess_t *s, sim_ps_t t_begin, sim_ps_t t_window)
{
    exec_t *x = s->x;
    sim_ps_t now = sim_now(x->sim);
    double dt_s = ps_to_s(now - (x->cfg.latency_from_queue ? t_window : t_begin));
    err_t e;
    if (s->prov.ops->completed && s->prov.ops->completed(s->prov.self, &s->env, &s->req, &e)) { exec_fail_err(x, &e); return; }
    s->plans++;
    s->context += s->req.new_tokens;
    exec_stats_t *st[2];
    size_t n_st = exec_sess_stats(s, st);
    bool token = false;      /* the plan gave a token: a decode step, or a turn's last prefill chunk */
    if (s->req.phase == PLAN_PREFILL) {
        s->prefill_left -= s->req.new_tokens;
        for (size_t i = 0; i < n_st; i++) {
            st[i]->prefill_tokens += s->req.new_tokens;
            hist_add(st[i]->prefill_chunk_s, dt_s);
        }
        /* the turn's last prefill chunk samples its first token: TTFT ends here, and the turn's
         * decode steps give the tokens after it */
        if (!s->prefill_left && !s->first_token_done && s->decode_left) {
            s->decode_left--;
            token = true;
        }
    } else {
        s->decode_left--;
        s->decoded++;
        s->t_decode_ps += now - t_begin;
        token = true;
    }
    for (size_t i = 0; token && i < n_st; i++) {
        st[i]->decode_tokens++;
        if (s->req.phase != PLAN_PREFILL) hist_add(st[i]->step_s, dt_s);
        if (st[i]->decode_tokens == 1) st[i]->first_token_s = ps_to_s(now);
        st[i]->last_token_s = ps_to_s(now);
        if (!s->first_token_done) hist_add(st[i]->ttft_s, ps_to_s(now - s->t_turn_ready));
    }
    if (token && !s->first_token_done) {
        s->first_token_done = true;
        s->t_first_token = now;
    }
    if (x->cfg.on_plan) x->cfg.on_plan(x->cfg.on_plan_arg, s->id, s->req.phase, s->req.context_tokens, dt_s);
    double idle_s = s->turns[s->turn].step_idle_s;
    if ((s->prefill_left || s->decode_left) && idle_s > 0) {   /* the host pauses before the next step */
        s->state = S_THINKING;
        sim_ps_t at = sim_ps_add(now, sim_ps_or_never(idle_s));
        if (at != SIM_TIME_NEVER && sim_at(x->sim, at, step_ready_ev, s, &e)) exec_fail_err(x, &e);
        return;
    }
    if (s->prefill_left || s->decode_left) { exec_sess_next(s); return; }
    bool met = turn_meets_slo(s, now);
    for (size_t i = 0; i < n_st; i++) {
        st[i]->turns_done++;
        st[i]->turns_slo_ok += met;
        st[i]->turns_all++;
        st[i]->turn_all_s += ps_to_s(now - s->t_turn_ready);
    }
    s->turn++;
    if (s->turn >= s->n_turns) { exec_sess_finish(s, false); return; }
    const exec_turn_t *t = &s->turns[s->turn];
    sim_ps_t at = s->open_loop && t->arrival_s >= 0 ? sim_ps_or_never(t->arrival_s)
                                                    : sim_ps_add(now, sim_ps_or_never(t->think_s));
    if (at < now) at = now;
    s->state = S_THINKING;
    /* a turn beyond what the clock holds is after every run's end: the session thinks to the end */
    if (at != SIM_TIME_NEVER && sim_at(x->sim, at, turn_ready_ev, s, &e)) exec_fail_err(x, &e);
}
