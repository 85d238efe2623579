/* registry — the attention methods odsim knows: the built-in modules' tables in their kind order,
 * then any registered at run time, and the scan families their tables name. */
#include <stdio.h>
#include <string.h>
#include "models/method_ops.h"
#include "models/methods/builtin.h"

/* kinds 0..5 as scenarios have always numbered them */
static const method_ops_t *const builtin[] = {&method_dense_ops, &method_pertoken_ops, &method_sparq_ops,
                                              &method_fathom_ops, &method_hashattn_ops, &method_landmark_ops};
#define N_BUILTIN (int)(sizeof builtin / sizeof builtin[0])

static struct {
    int n;
    const method_ops_t *ops[METHOD_MAX];
    const char *names[METHOD_MAX + 1];
    int n_families;
    char families[METHOD_SCAN_FAMILIES_MAX][40];
} reg;

static int add_family(const char *family, const char *form)
{
    if (reg.n_families == METHOD_SCAN_FAMILIES_MAX) return -1;
    char *at = reg.families[reg.n_families++];
    if (form) snprintf(at, sizeof reg.families[0], "%s_%s", family, form);
    else snprintf(at, sizeof reg.families[0], "%s", family);
    return 0;
}

static int forms_count(const method_ops_t *ops)
{
    int n = 0;
    while (ops->scan_family && ops->scan_forms && ops->scan_forms[n]) n++;
    return n;
}

/* The built-in methods, on first use: their families, then their families' forms. */
static void init(void)
{
    if (reg.n) return;
    for (int i = 0; i < N_BUILTIN; i++) {
        reg.ops[i] = builtin[i];
        reg.names[i] = builtin[i]->name;
        if (builtin[i]->scan_family) add_family(builtin[i]->scan_family, NULL);
    }
    for (int i = 0; i < N_BUILTIN; i++)
        for (int f = 0; f < forms_count(builtin[i]); f++) add_family(builtin[i]->scan_family, builtin[i]->scan_forms[f]);
    reg.n = N_BUILTIN;
}

int method_register(const method_ops_t *ops, err_t *e)
{
    init();
    if (!ops->name || !*ops->name || !ops->resolve)
        return err_set(e, ERR_INVAL, "method_register: a method needs a name and a budget rule (resolve)");
    if (method_find(ops->name) >= 0) return err_set(e, ERR_INVAL, "method_register: method '%s' exists", ops->name);
    if (reg.n == METHOD_MAX) return err_set(e, ERR_RANGE, "method_register: %d methods already (at most %d)", reg.n, METHOD_MAX);
    int families = ops->scan_family ? 1 + forms_count(ops) : 0;
    if (reg.n_families + families > METHOD_SCAN_FAMILIES_MAX)
        return err_set(e, ERR_RANGE, "method_register: '%s' adds %d scan families to %d (at most %d)", ops->name, families,
                       reg.n_families, METHOD_SCAN_FAMILIES_MAX);
    if (ops->scan_family) add_family(ops->scan_family, NULL);
    for (int f = 0; f < forms_count(ops); f++) add_family(ops->scan_family, ops->scan_forms[f]);
    reg.ops[reg.n] = ops;
    reg.names[reg.n++] = ops->name;
    return ERR_OK;
}

int method_count(void)
{
    init();
    return reg.n;
}

const method_ops_t *method_ops_at(int kind)
{
    init();
    return kind >= 0 && kind < reg.n ? reg.ops[kind] : NULL;
}

int method_find(const char *name)
{
    init();
    for (int i = 0; i < reg.n; i++)
        if (!strcmp(reg.names[i], name)) return i;
    return -1;
}

const char *const *method_names(void)
{
    init();
    return reg.names;
}

int method_scan_family_count(void)
{
    init();
    return reg.n_families;
}

const char *method_scan_family_name(int family)
{
    init();
    return family >= 0 && family < reg.n_families ? reg.families[family] : NULL;
}
