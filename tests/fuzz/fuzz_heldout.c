/* libFuzzer target: the held-out rule's reader (validation/heldout.c) on arbitrary YAML. Either loads
 * or fails with a message naming the input; never crashes, leaks or hangs. */
#include <stdint.h>
#include <stdlib.h>

#include "tests/fuzz/fuzz_text.h"
#include "validation/heldout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    heldout_t *h;
    err_t e;
    if (heldout_load_string("fuzz.yaml", text, &h, &e)) {
        if (!strstr(e.msg, "fuzz.yaml")) abort();
    } else {
        heldout_free(h);
    }
    free(text);
    return 0;
}
