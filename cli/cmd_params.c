/* odsim params — every scenario, method, generator, hardware, quality and replay-workload parameter with
 * default and meaning. */
#include <stdio.h>
#include <string.h>

#include "cli/cmd.h"
#include "cli/study_cfg.h"
#include "models/hwcat.h"
#include "models/method.h"
#include "traces/tracegen.h"
#include "validation/kvsynth.h"
#include "validation/wlgen.h"

static int params_main(int argc, char **argv);

const cmd_t cmd_params = {
    "params", "list every scenario, method, generator, hardware, quality and replay parameter with its default",
    "usage: odsim params [scenario|method|generator|hardware|quality|replay]\n"
    "  prints each parameter: key, type, default, range and meaning (all sections without argument)\n",
    params_main};

static int params_main(int argc, char **argv)
{
    if (argc > 2) return cmd_usage_error(&cmd_params, "one section at most");
    const char *only = argc == 2 ? argv[1] : NULL;
    static const char *const sections[] = {"scenario", "method", "generator", "hardware", "quality", "replay"};
    bool known = !only;
    for (size_t i = 0; i < sizeof sections / sizeof sections[0] && only; i++) known |= !strcmp(only, sections[i]);
    if (!known) return cmd_usage_error(&cmd_params, "unknown section '%s'", only);
    if (!only || !strcmp(only, "scenario")) scn_describe(stdout);
    if (!only || !strcmp(only, "method")) method_cfg_describe(stdout);
    if (!only || !strcmp(only, "generator")) {
        puts("workload.generator:");
        tracegen_params_describe(stdout);
    }
    if (!only || !strcmp(only, "hardware")) {
        puts("hardware (catalog parameters; override with hardware.set):");
        hwcat_describe(stdout);
    }
    if (!only || !strcmp(only, "quality")) {
        puts("odsim quality --set (synthetic keys and queries):");
        kvsynth_describe(stdout);
    }
    if (!only || !strcmp(only, "replay")) wlgen_describe(stdout);
    return 0;
}
