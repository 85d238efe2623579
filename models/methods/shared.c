/* shared — the closed forms and names the method modules share (models/method_ops.h): a plane
 * index's read bits, a fixed budget's check, SparQ's storage names. It calls no method. */
#include <math.h>
#include "models/method_ops.h"

const char *const method_store_names[] = {"4bit", "bf16", NULL};

double method_plane_bits(double channels, int t)
{
    double bits = channels * fmax(0.0, FATHOM_MAX_BITS - t);
    return t == 0 ? bits + channels * FATHOM_SCALE_BITS : bits;
}

double method_plane_pieces(double channels, int t)
{
    return channels * fmax(0.0, FATHOM_MAX_BITS - t) + (t == 0 ? channels : 0);
}

int method_fixed_budget(const method_cfg_t *c, const char *name, double fixed, const char *what, method_index_t *ix,
                        err_t *e)
{
    if (c->budget_bits != 0 && fabs(c->budget_bits - fixed) > 1e-9)
        return err_set(e, ERR_INVAL, "%s reads %g index bits per token per KV head for this model%s; budget %g cannot be asked",
                       name, fixed, what, c->budget_bits);
    ix->budget_bits = ix->stored_bits = fixed;
    return ERR_OK;
}
