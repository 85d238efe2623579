/* version — odsim's version and the git commit it was built from, for every output's provenance.
 * Defined in build/gen/version.c, which make regenerates when the commit changes, so every build
 * mode and object agrees (a macro baked into each object went stale in objects not recompiled). */
#ifndef ODSIM_COMMON_VERSION_H
#define ODSIM_COMMON_VERSION_H

extern const char odsim_version[];
extern const char odsim_git_rev[];

#endif
