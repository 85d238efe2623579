#include "traces/import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomicio.h"
#include "traces/import_int.h"

void trace_import_opts_default(trace_import_opts_t *o)
{
    o->scale = 1.0;
    o->scale_to_tokens = 0;
    o->min_shared_blocks = TRACE_MOONCAKE_DEFAULT_M;
}

static const char *const fmt_names[] = {"mooncake", "azure", "tracelab"};

int trace_format_parse(const char *name, trace_format_t *out, err_t *e)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, fmt_names[i])) {
            *out = (trace_format_t)i;
            return ERR_OK;
        }
    return err_set(e, ERR_NOTFOUND, "unknown trace format '%s' (known: mooncake, azure, tracelab)", name);
}

const char *trace_format_name(trace_format_t f) { return (unsigned)f < 3 ? fmt_names[f] : "?"; }

int trace_import_mem(trace_format_t f, const char *name, const char *buf, size_t len,
                     const trace_import_opts_t *o, trace_t *out, err_t *e)
{
    trace_init(out);
    trace_import_opts_t def;
    if (!o) {
        trace_import_opts_default(&def);
        o = &def;
    }
    if (o->min_shared_blocks < 1)
        return err_set(e, ERR_INVAL, "--min-shared-blocks %d: must be at least 1", o->min_shared_blocks);
    if (!(o->scale >= 1.0) || o->scale > 1e9)
        return err_set(e, ERR_INVAL, "--scale %g: must be in [1, 1e9] (scaling stretches contexts)", o->scale);
    if (o->scale != 1.0 && o->scale_to_tokens)
        return err_set(e, ERR_INVAL, "--scale and --scale-to exclude each other");
    char made[256], what[64];
    snprintf(what, sizeof what, "trace import %s", trace_format_name(f));
    trace_made_by(made, sizeof made, what);
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    int rc = trace_header_init(&out->hdr, trace_format_name(f), made, e);
    if (rc || (rc = trace_strset(&out->hdr.source_file, base, e))) return rc;
    out->hdr.source_bytes = len;
    switch (f) {
    case TRACE_FMT_MOONCAKE: rc = import_mooncake(name, buf, len, o, out, e); break;
    case TRACE_FMT_AZURE: rc = import_azure(name, buf, len, o, out, e); break;
    case TRACE_FMT_TRACELAB: rc = import_tracelab(name, buf, len, o, out, e); break;
    default: rc = err_set(e, ERR_INVAL, "unknown trace format %d", (int)f);
    }
    if (!rc && (o->scale != 1.0 || o->scale_to_tokens)) {
        rc = trace_scale(out, o->scale, o->scale_to_tokens, e);
        if (!rc && o->scale_to_tokens)
            rc = trace_header_add(&out->hdr, false, "scale_to_tokens", e, "%llu", (unsigned long long)o->scale_to_tokens);
        else if (!rc)
            rc = trace_header_add(&out->hdr, false, "scale", e, "%.17g", o->scale);
        if (!rc) rc = import_check(name, out, NULL, e);
    }
    return rc;
}

int trace_import_file(trace_format_t f, const char *path, const trace_import_opts_t *o, trace_t *out, err_t *e)
{
    trace_init(out);
    char *buf;
    size_t len;
    int rc = atomicio_read_all(path, TRACE_IMPORT_MAX_BYTES, &buf, &len, e);
    if (rc) return rc;
    rc = trace_import_mem(f, path, buf, len, o, out, e);
    free(buf);
    return rc;
}
