/* checks.h: reference checks of every kernel (see checks.cu). */
#ifndef KB_CHECKS_H
#define KB_CHECKS_H

#include <stdint.h>

/* Run every kernel on fresh random inputs derived from seed and compare with
 * the C references; prints one line per check. Returns 0, or 1 if any failed. */
int kb_checks(uint64_t seed);

#endif
