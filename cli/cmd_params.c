/* odsim params — every scenario, method, generator, hardware, quality and replay-workload parameter with
 * default and meaning. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
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
    "usage: odsim params [scenario|method|generator|hardware|quality|replay] [--json]\n"
    "  prints each parameter: key, type, default, range and meaning (all sections without argument)\n"
    "  --json  one JSON document: {\"sections\": [{\"part\", \"section\", \"params\": [{\"key\", \"type\",\n"
    "          \"default\" (null: required), \"min\", \"max\", \"choices\",\n"
    "          \"words\" (accepted in a number's place, e.g. auto), \"meaning\"}]}], \"hardware\": [{\"file\",\n"
    "          \"key\", \"unit\", \"required\", \"min\", \"min_exclusive\", \"meaning\"}]}\n",
    params_main};

/* --json: collects what cfg_params_describe is handed into the "sections" array. */
typedef struct collect {
    json_t *sections;
    const char *part;
} collect_t;

static void collect_section(void *arg, const char *section, const cfg_param_t *params, size_t n)
{
    collect_t *c = arg;
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        const cfg_param_t *p = &params[i];
        json_t *o = json_pack("{s:s,s:s,s:o,s:s}", "key", p->key, "type", cfg_type_name(p->type), "default",
                              p->dflt ? json_string(p->dflt) : json_null(), "meaning", p->doc ? p->doc : "");
        if (p->type == CFG_T_ENUM) {
            json_t *ch = json_array();
            for (int k = 0; p->choices && p->choices[k]; k++) json_array_append_new(ch, json_string(p->choices[k]));
            json_object_set_new(o, "choices", ch);
        } else if (p->min <= p->max) {
            json_object_set_new(o, "min", json_real(p->min));
            json_object_set_new(o, "max", json_real(p->max));
        }
        if (p->type != CFG_T_ENUM && p->choices) { /* words a number's place also takes ("auto") */
            json_t *w = json_array();
            for (int k = 0; p->choices[k]; k++) json_array_append_new(w, json_string(p->choices[k]));
            json_object_set_new(o, "words", w);
        }
        json_array_append_new(list, o);
    }
    json_array_append_new(c->sections, json_pack("{s:s,s:s,s:o}", "part", c->part, "section", section, "params", list));
}

static void collect_hw(void *arg, const char *file, const hw_param_def_t *d, bool checked)
{
    json_array_append_new(arg, json_pack("{s:s,s:s,s:s,s:b,s:f,s:b,s:s}", "file", file, "key", d->key, "unit", d->unit,
                                         "required", checked && d->required, "min", d->min, "min_exclusive", d->min_excl,
                                         "meaning", d->doc));
}

static void describe_part(const char *part, FILE *fp)
{
    if (!strcmp(part, "scenario")) scn_describe(fp);
    else if (!strcmp(part, "method")) method_cfg_describe(fp);
    else if (!strcmp(part, "generator")) tracegen_params_describe(fp);
    else if (!strcmp(part, "quality")) kvsynth_describe(fp);
    else if (!strcmp(part, "replay")) wlgen_describe(fp);
}

static int print_json(const char *only, const char *const *parts, size_t n_parts)
{
    collect_t c = {json_array(), NULL};
    json_t *hw = json_array();
    cfg_params_receive(collect_section, &c);
    for (size_t i = 0; i < n_parts; i++)
        if (!only || !strcmp(only, parts[i])) {
            c.part = parts[i];
            describe_part(parts[i], stdout);
        }
    cfg_params_receive(NULL, NULL);
    if (!only || !strcmp(only, "hardware")) hwcat_describe_each(collect_hw, hw);
    json_t *doc = json_pack("{s:o,s:o}", "sections", c.sections, "hardware", hw);
    return cmd_put_json("params", doc);
}

static int params_main(int argc, char **argv)
{
    bool json = false;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (argv[i][0] == '-') return cmd_usage_error(&cmd_params, "unknown option '%s'", argv[i]);
        else if (only) return cmd_usage_error(&cmd_params, "one section at most");
        else only = argv[i];
    }
    static const char *const sections[] = {"scenario", "method", "generator", "hardware", "quality", "replay"};
    bool known = !only;
    for (size_t i = 0; i < sizeof sections / sizeof sections[0] && only; i++) known |= !strcmp(only, sections[i]);
    if (!known) return cmd_usage_error(&cmd_params, "unknown section '%s'", only);
    static const char *const parts[] = {"scenario", "method", "generator", "quality", "replay"};
    if (json) return print_json(only, parts, sizeof parts / sizeof *parts);
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
