/* libFuzzer target: the user plan reader (models/uplan.c) on arbitrary bytes. It either fails with a
 * message, or accepts a plan; a whole plan evaluated at its context and at three times it (two
 * layers) is either refused with a message or a replay session that the format's writer writes and
 * its parser reads back equal. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/replay_fmt.h"
#include "models/uplan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rf_workload_t w, back; /* large: not on the stack */

static void round_trip(const uplan_t *u, uint64_t context)
{
    err_t e;
    memset(&w, 0, sizeof w);
    snprintf(w.name, sizeof w.name, "fuzz");
    w.mode = RF_MODE_STREAMS, w.window_ms = 500, w.min_steps = 10, w.warmup_steps = 3, w.seed = 1, w.n_sessions = 1;
    if (uplan_session(u, context, uplan_layers(u, 2), &w.sessions[0], NULL, &e)) {
        if (!e.msg[0]) abort();
        return;
    }
    char *buf = NULL, err[512];
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f || rf_write(f, &w)) abort();
    fclose(f);
    if (rf_parse(buf, n, "canonical", &back, err, sizeof err) || !rf_equal(&w, &back)) abort();
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uplan_t *u = NULL;
    err_t e;
    if (uplan_parse("fuzz.yaml", (const char *)data, size, &u, &e)) {
        if (u || !e.msg[0]) abort();
        return 0;
    }
    if (u->whole) {
        round_trip(u, u->context);
        round_trip(u, u->context * 3);
    }
    uplan_free(u);
    return 0;
}
