/* libFuzzer target: the calibration profile reader (models/calib.c: scalars, curves with their
 * points, provenance sections) on arbitrary YAML; a loaded profile must then give every parameter
 * it holds by name. Either loads or fails with a message naming the input. */
#include <stdint.h>
#include <stdlib.h>

#include "models/calib.h"
#include "tests/fuzz/fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    calib_t *c;
    err_t e;
    if (calib_load_string("fuzz.yaml", text, &c, &e)) {
        if (!strstr(e.msg, "fuzz.yaml")) abort();
    } else {
        for (size_t i = 0; i < calib_count(c); i++) {
            const calib_param_t *p = calib_at(c, i);
            double v;
            if (!p || calib_get(c, p->name, &v, &e) || v != p->value) abort();
        }
        calib_free(c);
    }
    free(text);
    return 0;
}
