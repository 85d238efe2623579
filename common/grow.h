/* grow — capacity doubling for a growable array (one helper, so each array does not repeat it). */
#ifndef ODSIM_COMMON_GROW_H
#define ODSIM_COMMON_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Makes *p (of *cap elements of elem bytes) hold at least need elements: doubles from 1024 as
 * needed. Returns 0, or -1 out of memory (then *p and *cap are unchanged). */
static inline int grow_to(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 1024;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / elem) return -1;
        nc *= 2;
    }
    void *np = realloc(*p, nc * elem);
    if (!np) return -1;
    *p = np;
    *cap = nc;
    return 0;
}

#endif
