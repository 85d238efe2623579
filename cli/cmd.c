/* Messages and option helpers shared by the commands. */
#include "cli/cmd.h"
#include "cli/par.h"
#include "common/cfg.h"

#include <jansson.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_fail(const char *name, const char *fmt, ...)
{
    if (par_rank()) return 1; /* an MPI job's ranks share one stderr: rank 0 speaks for them */
    va_list ap;
    fprintf(stderr, "odsim %s: ", name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

int cmd_usage_error(const cmd_t *c, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "odsim %s: ", c->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s", c->usage);
    return 2;
}

int cmd_is_help(const char *s) { return !strcmp(s, "--help") || !strcmp(s, "-h"); }

int cmd_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cmd_parse_count(const char *s, long long lo, long long hi, long long *out)
{
    cfg_doc_t *doc = NULL;
    err_t e;
    int64_t v = 0;
    /* a flow scalar only: a value that YAML would read as a map, list or document is no count */
    int rc = !*s || strpbrk(s, ":{}[],#&*!|>'\"%@`\n") ? -1 : cfg_parse_string("count", s, strlen(s), &doc, &e);
    if (!rc) rc = cfg_int64(cfg_root(doc), &v, &e);
    cfg_free(doc);
    if (rc || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cmd_put_json(const char *name, json_t *doc)
{
    char *txt = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) : NULL;
    json_decref(doc);
    if (!txt) return cmd_fail(name, "out of memory");
    puts(txt);
    free(txt);
    return 0;
}
