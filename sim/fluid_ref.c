#include "sim/fluid_ref.h"

#include <math.h>
#include <stdlib.h>

#include "common/err.h"

int fluid_ref_solve(size_t n_res, const double *capacity, size_t n, const fluid_ref_flow_t *flows,
                    double *rate)
{
    char *fixed = calloc(n ? n : 1, 1);
    double *room = malloc((n_res ? n_res : 1) * sizeof *room);
    double *wsum = malloc((n_res ? n_res : 1) * sizeof *wsum);
    if (!fixed || !room || !wsum) {
        free(fixed);
        free(room);
        free(wsum);
        return ERR_NOMEM;
    }
    for (size_t left = n; left > 0;) {
        /* Capacity left and unfixed weight on each constraint, from scratch. */
        for (size_t j = 0; j < n_res; j++) {
            room[j] = capacity[j];
            wsum[j] = 0;
        }
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < flows[i].n_uses; k++) {
                if (fixed[i]) room[flows[i].res[k]] -= flows[i].coef[k] * rate[i];
                else wsum[flows[i].res[k]] += flows[i].coef[k] * flows[i].weight;
            }
        double level = INFINITY;
        size_t b = n_res;
        for (size_t j = 0; j < n_res; j++) {
            if (wsum[j] <= 0) continue;
            double l = (room[j] > 0 ? room[j] : 0) / wsum[j];
            if (l < level) {
                level = l;
                b = j;
            }
        }
        size_t c = n;
        for (size_t i = 0; i < n; i++)
            if (!fixed[i] && flows[i].cap_rate > 0 && flows[i].cap_rate / flows[i].weight <= level &&
                (c == n || flows[i].cap_rate / flows[i].weight < flows[c].cap_rate / flows[c].weight))
                c = i;
        if (c < n) {
            rate[c] = flows[c].cap_rate;
            fixed[c] = 1;
            left--;
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            if (fixed[i]) continue;
            for (size_t k = 0; k < flows[i].n_uses; k++)
                if ((size_t)flows[i].res[k] == b) {
                    rate[i] = flows[i].weight * level;
                    fixed[i] = 1;
                    left--;
                    break;
                }
        }
    }
    free(fixed);
    free(room);
    free(wsum);
    return 0;
}
