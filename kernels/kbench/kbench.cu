/* kbench.cu: the calibration harness's command line.
 *
 *   kbench SUITE [--quick] [-o FILE.csv] [--model NAME] [--max-region GIB] [--only SECTION]
 *   kbench replay [-o FILE.csv] [--check] WORKLOAD...
 *
 * SUITE is link, kernels, step, concurrency, host, whole or prefill (run each in its own
 * invocation; concurrency forks its sessions before CUDA starts). --only runs
 * one section of link or kernels alone. replay runs workload files (docs/replay.md; suite_replay.cu).
 * Exit status: 0, 1 when a reference check failed, 2 on a fatal error or bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kb.h"

static int usage(void)
{
    fprintf(stderr, "usage: kbench link|kernels|step|concurrency|host|whole|prefill [--quick] [-o FILE.csv] "
                    "[--model NAME] [--max-region GIB] [--only SECTION (link: a section; kernels: attn, after_layer)]\n"
                    "       kbench replay [-o FILE.csv] [--check] WORKLOAD...\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    if (!strcmp(argv[1], "replay"))
        return kb_replay(argc - 2, argv + 2);
    kb_opts_t o;
    memset(&o, 0, sizeof o);
    o.model = "qwen3-8b";
    double region_gib = -1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            o.quick = 1;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            o.out_path = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            o.model = argv[++i];
        else if (!strcmp(argv[i], "--max-region") && i + 1 < argc)
            region_gib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            o.only = argv[++i];
        else
            return usage();
    }
    if (!kb_model(o.model)) {
        fprintf(stderr, "kbench: unknown model %s\n", o.model);
        return 2;
    }
    if (region_gib <= 0)
        region_gib = o.quick ? 1 : 16;
    o.max_region = (size_t)(region_gib * KB_GIB);
    const char *suite = argv[1];
    if (!strcmp(suite, "link"))
        return kb_suite_link(&o);
    if (!strcmp(suite, "kernels"))
        return kb_suite_kernels(&o);
    if (!strcmp(suite, "step"))
        return kb_suite_step(&o);
    if (!strcmp(suite, "concurrency"))
        return kb_suite_concurrency(&o);
    if (!strcmp(suite, "host"))
        return kb_suite_host(&o);
    if (!strcmp(suite, "whole"))
        return kb_suite_whole(&o);
    if (!strcmp(suite, "prefill"))
        return kb_suite_prefill(&o);
    return usage();
}
