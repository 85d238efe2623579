#include "models/opkind.h"

#include <string.h>

static const char *const opkind_names[] = {
#define OPKIND_NAME(id, name) name,
    OPKIND_LIST(OPKIND_NAME)
#undef OPKIND_NAME
};

const char *opkind_name(int k)
{
    return (k >= 0 && k < OPKIND_COUNT) ? opkind_names[k] : "?";
}

int opkind_find(const char *name)
{
    for (int k = 0; k < OPKIND_COUNT; k++)
        if (!strcmp(opkind_names[k], name)) return k;
    return -1;
}
