/* fuzz_text — the fuzz targets' shared step: the input as a NUL-terminated copy (the parsers under
 * test take C strings; an embedded NUL ends the text as it would a file read up to it). */
#ifndef ODSIM_TESTS_FUZZ_TEXT_H
#define ODSIM_TESTS_FUZZ_TEXT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char *fuzz_text(const uint8_t *data, size_t size)
{
    char *t = malloc(size + 1);
    if (!t) abort();
    memcpy(t, data, size);
    t[size] = '\0';
    return t;
}

#endif
