/* topk.c: C reference of the radix-select top-k. */
#include <stdlib.h>
#include "topk.h"

int kref_topk(const float *x, size_t n, int k, uint32_t *idx)
{
    size_t *hist = malloc(KREF_TOPK_BINS * sizeof *hist);
    if (!hist)
        return -1;
    uint32_t prefix = 0, mask = 0;
    size_t want = (size_t)k;             /* how many still to take at or below the prefix */
    for (int p = 0; p < KREF_TOPK_PASSES; p++) {
        int sh = kref_topk_shift(p), nb = 1 << kref_topk_bits(p);
        memset(hist, 0, KREF_TOPK_BINS * sizeof *hist);
        for (size_t i = 0; i < n; i++) {
            uint32_t key = kref_topk_key(x[i]);
            if ((key & mask) == prefix)
                hist[(key >> sh) & (uint32_t)(nb - 1)]++;
        }
        int d = nb - 1;
        while (hist[d] < want) {         /* total count at the prefix is >= want */
            want -= hist[d];
            d--;
        }
        prefix |= (uint32_t)d << sh;
        mask |= (uint32_t)(nb - 1) << sh;
    }
    size_t n_gt = (size_t)k - want, i_gt = 0, i_eq = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t key = kref_topk_key(x[i]);
        if (key > prefix)
            idx[i_gt++] = (uint32_t)i;
        else if (key == prefix && i_eq < want)
            idx[n_gt + i_eq++] = (uint32_t)i;
    }
    free(hist);
    return 0;
}
