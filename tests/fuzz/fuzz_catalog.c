/* libFuzzer target: the hardware catalogs' reader (models/hwcat.c) on arbitrary YAML, as the kind
 * the first byte picks (gpus, links, tiers, boxes), then resolving every box it loaded. Either loads
 * or fails with a message naming the input; never crashes, leaks or hangs. */
#include <stdint.h>
#include <stdlib.h>

#include "models/hwcat.h"
#include "tests/fuzz/fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    hwcat_t *cat;
    err_t e;
    if (hwcat_new(&cat, &e)) abort();
    char *text = fuzz_text(data + 1, size - 1);
    hw_kind_t kind = (hw_kind_t)(data[0] % HW_KIND_COUNT);
    if (hwcat_load_string(cat, kind, "fuzz.yaml", text, &e)) {
        if (!strstr(e.msg, "fuzz.yaml")) abort();   /* every error names the input */
    } else if (kind == HW_BOX) {
        for (size_t i = 0; i < hwcat_count(cat, HW_BOX); i++) {
            hw_t hw;
            hw_select_t sel = {.box = hwcat_name(cat, HW_BOX, i)};
            if (!hw_resolve(cat, &sel, NULL, &hw, &e)) hw_free(&hw);
            else if (!e.msg[0]) abort();
        }
    }
    free(text);
    hwcat_free(cat);
    return 0;
}
