/* study_steady — run.duration_s: auto. A replication runs until its measured window spans
 * run.steady_turns mean turn durations of its own box, measured as it goes, and holds as many finished
 * turns, or until run.max_duration_s (the engine's `until`); the study reports one that stopped there
 * transient.
 *
 * The checks are engine events at geometrically spaced times (every 1% of the time so far, at least
 * 1 ms apart): a few hundred per replication, and the run overshoots its rule by at most 1%. Being
 * events, they stop every replication at the same simulated time on every machine. */
#include <math.h>

#include "cli/study_int.h"

#define CHECK_REL 0.01
#define CHECK_MIN_S 1e-3

double study_mean_turn_s(const study_rep_t *rep)
{
    uint64_t done, open;
    double done_s, open_s;
    exec_turn_times(rep->x, &done, &done_s, &open, &open_s);
    if (!done && !open) return NAN;
    return (done_s + open_s) / (double)(done ? done : 1);
}

static void steady_check(sim_t *sim, void *arg)
{
    study_rep_t *rep = arg;
    double now_s = (double)sim_now(sim) / (double)SIM_PS_PER_S, mean_s = study_mean_turn_s(rep);
    uint64_t done, open;
    double done_s, open_s;
    exec_turn_times(rep->x, &done, &done_s, &open, &open_s);
    if (!rep->warmed && rep->run->warmup_auto && done && now_s >= mean_s) {
        study_rep_window_start(rep);
        rep->warmup_s = now_s;
    }
    /* as many turns done in the window as it spans mean turns: idle time between sessions alone
     * does not make a window steady */
    double steady = rep->run->steady_turns;
    if (rep->warmed && (double)(done - rep->turns_at_warmup) >= steady && now_s - rep->warmup_s >= steady * mean_s) {
        rep->steady = true;
        sim_stop(sim);
        return;
    }
    double dt_s = fmax(CHECK_REL * now_s, CHECK_MIN_S);
    sim_ps_t dt;
    err_t e;
    if (!sim_ps_of_s(dt_s, SIM_ROUND_DOWN, &dt)) return; /* beyond the clock: past every run's end */
    if (sim_at(sim, sim_ps_add(sim_now(sim), dt), steady_check, rep, &e)) sim_fail(sim, &e);
}

int study_steady_start(study_rep_t *rep, err_t *e)
{
    sim_ps_t first;
    if (!sim_ps_of_s(CHECK_MIN_S, SIM_ROUND_DOWN, &first)) first = 1;
    return sim_at(rep->sim, first, steady_check, rep, e);
}
