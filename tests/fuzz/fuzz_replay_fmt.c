/* libFuzzer target: the replay format's parser (kernels/replay_fmt.c) on arbitrary bytes, given
 * without a terminating NUL (it must never read past them). It either fails with a message naming the
 * input, or accepts a workload that its canonical writer writes and the parser reads back equal. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/replay_fmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rf_workload_t w, back; /* large (16 sessions x 512 ops): not on the stack */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1); /* exactly size bytes, so ASan sees any over-read */
    if (!copy) abort();
    memcpy(copy, data, size);
    char err[512];
    if (rf_parse((const char *)copy, size, "fuzz.replay", &w, err, sizeof err)) {
        if (strncmp(err, "fuzz.replay", 11)) abort();
        free(copy);
        return 0;
    }
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f || rf_write(f, &w)) abort();
    fclose(f);
    if (rf_parse(buf, n, "canonical", &back, err, sizeof err) || !rf_equal(&w, &back)) abort();
    free(buf);
    free(copy);
    return 0;
}
