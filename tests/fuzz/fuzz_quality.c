/* libFuzzer target: the quality table's reader (models/quality.c: metrics, notes, published points)
 * on arbitrary YAML, then a lookup per method of every point it loaded. Either loads or fails with a
 * message naming the input. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "models/quality.h"
#include "tests/fuzz/fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    quality_t *q;
    err_t e;
    if (quality_load_string("fuzz.yaml", text, &q, &e)) {
        if (!strstr(e.msg, "fuzz.yaml")) abort();
    } else {
        for (size_t i = 0; quality_at(q, i); i++) {
            const quality_point_t *p = quality_at(q, i), *out[4];
            size_t n;
            if (!*p->origin) abort();
            if (!isnan(p->value) && quality_lookup(q, p->method, p->metric, p->budget_bits, p->k, out, 4, &n, &e)) abort();
        }
        quality_free(q);
    }
    free(text);
    return 0;
}
