#include "cli/val_clamp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The shift of case cs when `clamp` is clamped (NAN: the prediction failed); *out its prediction. */
static int shift_of(const cmp_case_t *cs, const char *clamp, val_clamp_fn fn, void *arg, cmp_pred_t *out, double *shift,
                    err_t *e)
{
    err_t pe;
    err_clear(&pe);
    int rc = fn(arg, clamp, out, &pe);
    if (rc == ERR_NOMEM) return err_set(e, ERR_NOMEM, "%s", pe.msg);
    *shift = rc ? NAN : cmp_shift_pct(cs, &cs->pred, out);
    return ERR_OK;
}

int val_clamp_case(cmp_t *c, size_t i, const char *names, val_clamp_fn fn, void *arg, err_t *e)
{
    char by[2048] = "";
    const cmp_case_t *cs = cmp_case_at(c, i);
    if (!*names || !cs || !cs->ok) return ERR_OK;
    cmp_pred_t all, one;
    double shift;
    int rc = shift_of(cs, names, fn, arg, &all, &shift, e);
    if (rc) return rc;
    bool moved = !(shift <= CMP_FLAG_PCT);
    /* which of several move it alone */
    for (const char *p = names; moved && strchr(names, ',') && *p;) {
        size_t n = strcspn(p, ",");
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
        p += n + (p[n] == ',');
        double s1;
        if ((rc = shift_of(cs, name, fn, arg, &one, &s1, e))) return rc;
        if (!(s1 <= CMP_FLAG_PCT))
            snprintf(by + strlen(by), sizeof by - strlen(by), "%s%s", *by ? "," : "", name);
    }
    return cmp_set_clamp(c, i, names, isnan(shift) ? NULL : &all, by, e);
}
