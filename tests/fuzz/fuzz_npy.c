/* libFuzzer target: the .npy reader (common/npy.h) on arbitrary bytes. It must either give an array
 * whose element count is its shape's product or fail with a message; never crash, leak or hang. */
#include <stdint.h>
#include <stdlib.h>

#include "common/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    npy_array_t a;
    err_t e;
    if (npy_parse("fuzz.npy", data, size, &a, &e)) {
        if (!e.msg[0] || a.data) abort(); /* every failure says why and owns nothing */
        return 0;
    }
    size_t count = 1;
    for (int i = 0; i < a.ndim; i++) count *= a.shape[i];
    if (count != a.count || a.ndim < 1 || a.ndim > NPY_MAX_DIMS) abort();
    for (size_t i = 0; i < a.count; i++) (void)a.data[i];   /* readable */
    npy_free(&a);
    return 0;
}
