#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void err_clear(err_t *e)
{
    if (!e) return;
    e->code = ERR_OK;
    e->msg[0] = '\0';
}

int err_set(err_t *e, int code, const char *fmt, ...)
{
    if (!e) return code;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

int err_prefix(err_t *e, const char *fmt, ...)
{
    if (!e) return ERR_INVAL;
    char head[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    char tail[ERR_MSG_MAX];
    memcpy(tail, e->msg, sizeof tail);
    snprintf(e->msg, sizeof e->msg, "%s: %s", head, tail);
    return e->code;
}

const char *err_name(int code)
{
    switch (code) {
    case ERR_OK: return "ok";
    case ERR_INVAL: return "invalid";
    case ERR_IO: return "io";
    case ERR_NOMEM: return "out of memory";
    case ERR_PARSE: return "parse";
    case ERR_RANGE: return "range";
    case ERR_CAPACITY: return "capacity";
    case ERR_CYCLE: return "cycle";
    case ERR_CONVERGE: return "no convergence";
    case ERR_NOTFOUND: return "not found";
    case ERR_INFEASIBLE: return "infeasible";
    default: return "error";
    }
}
