/* study_alone — one sweep point resolved for a plan alone on an idle machine (cli/study_alone.h). */
#include "cli/study_alone.h"

#include <stdlib.h>

#include "cli/study_int.h"
#include "models/hwinst.h"

struct study_alone {
    study_point_t pt;
    calib_t *cal;
    sim_t *sim;
};

int study_alone_open(study_t *s, size_t i, study_alone_t **out, err_t *e)
{
    *out = NULL;
    study_alone_t *a = calloc(1, sizeof *a);
    if (!a) return err_set(e, ERR_NOMEM, "out of memory");
    int rc = study_point_resolve(s, i, &a->pt, e);
    if (rc) {
        free(a);
        return rc;
    }
    rc = study_calib_load(s, &a->pt, &a->cal, e);
    if (!rc) rc = sim_new(&a->sim, e);
    if (!rc) rc = hwinst_build(&a->pt.hw, a->cal, a->sim, e);
    if (rc) {
        study_alone_free(a);
        return rc;
    }
    *out = a;
    return ERR_OK;
}

void study_alone_free(study_alone_t *a)
{
    if (!a) return;
    sim_free(a->sim);
    calib_free(a->cal);
    study_point_free(&a->pt);
    free(a);
}

const hw_t *study_alone_hw(const study_alone_t *a) { return &a->pt.hw; }
calib_t *study_alone_calib(study_alone_t *a) { return a->cal; }
sim_t *study_alone_sim(study_alone_t *a) { return a->sim; }
const method_t *study_alone_method(const study_alone_t *a) { return a->pt.method; }
