/* selftest — a seeded random engine scenario that prints its completion trace.
 *
 * Flows with random paths, weights, caps, latencies and sizes arrive as a Poisson stream; some done
 * callbacks start follow-up flows (re-entrancy); capacities change now and then (time slices). Each
 * completion prints one line (time in ps, flow number, lost time charged per resource), so two runs,
 * or the rel, dbg and san builds, can be compared byte for byte (`odsim bench --trace SEED`). */
#ifndef ODSIM_SIM_SELFTEST_H
#define ODSIM_SIM_SELFTEST_H

#include <stdio.h>

#include "common/err.h"

/* Runs the scenario for `seed` and writes its trace to out. Returns 0, or an engine error (with e). */
int selftest_trace(FILE *out, unsigned long seed, err_t *e);

#endif
