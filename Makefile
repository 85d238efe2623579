# odsim — top-level build. Plain GNU make; every folder's *.c is picked up by wildcard.
#
#   make            odsim and everything that needs no GPU (release build)
#   make run        the default scenario
#   make test       the whole suite, release and ASan+UBSan builds, plus cross-build determinism
#   make kernels    CUDA kernels and kbench (skipped with a message when nvcc is absent)
#   make bench      engine and simulator benchmarks
#   make fuzz       libFuzzer targets, bounded time each (FUZZ_SECONDS)
#   make deps       installs the Debian packages the project needs, when missing
#   make install    PREFIX/bin/odsim and its data under PREFIX/share/odsim (PREFIX=/usr/local, DESTDIR)

SHELL       := /bin/bash
CC          ?= cc
CUDA_ARCH   ?= sm_90
FUZZ_SECONDS ?= 20
VERSION     := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
GIT_REV     := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

DEB_PKGS := libyaml-dev libgsl-dev libprotobuf-c-dev protobuf-c-compiler libjansson-dev \
            libcriterion-dev gnuplot-nox clang libclang-rt-14-dev libopenmpi-dev openmpi-bin

WARN   := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith \
          -Wformat=2 -Wno-format-truncation -Wvla -Wno-unused-parameter -Werror
CSTD   := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
CFLAGS_COMMON := $(CSTD) $(WARN) -ffp-contract=off -fno-fast-math -MMD -MP \
          -I. -Ibuild/gen -DODSIM_VERSION=\"$(VERSION)\"
LDLIBS := -lyaml -lgsl -lgslcblas -lprotobuf-c -ljansson -lm

# MPI=1 (the default where mpicc is found) builds rel and dbg odsim able to spread a sweep over the
# ranks of `mpirun` (cli/par.h); MPI=0 builds without it. The sanitizer build never links MPI (its
# library's own allocations are not ours to check). Switching MPI rebuilds what it changes (the
# build/<mode>/.mpi<0|1> stamp); on a fresh machine `make deps` installs mpicc first and make restarts
# (below), so the first build already has it.
MPI ?= $(if $(shell command -v mpicc 2>/dev/null),1,0)
ifeq ($(MPI),1)
MPI_CFLAGS := -DODSIM_MPI $(shell mpicc --showme:compile)
MPI_LIBS   := $(shell mpicc --showme:link)
endif
MODE_rel_MPI := $(MPI_LIBS)
MODE_dbg_MPI := $(MPI_LIBS)

MODE_rel_CFLAGS := -O2 -g $(MPI_CFLAGS)
MODE_dbg_CFLAGS := -O0 -g $(MPI_CFLAGS)
MODE_san_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
MODE_san_LDFLAGS := -fsanitize=address,undefined
MODES := rel dbg san

# Module dependency order: a module's tests link it and everything to its right.
MODULES      := common sim models traces validation
LIBDEPS_common     := common
LIBDEPS_sim        := sim common
LIBDEPS_models     := models sim common
LIBDEPS_traces     := traces common
LIBDEPS_validation := validation models sim common
LIBDEPS_cli        := validation models traces sim common
# tests/models also time the method's plans as kbench does (validation/protocol.h)
TESTLIBS_models    := validation models sim common

PROTO      := $(wildcard traces/*.proto)
PROTO_C    := $(patsubst traces/%.proto,build/gen/%.pb-c.c,$(PROTO))
PROTO_H    := $(PROTO_C:.c=.h)

srcs_of = $(wildcard $(1)/*.c $(1)/*/*.c) $(if $(filter traces,$(1)),$(PROTO_C)) $(if $(filter common,$(1)),build/gen/version.c)
CLI_SRCS := $(filter-out cli/main.c,$(wildcard cli/*.c))
CMD_NAMES := $(patsubst cli/cmd_%.c,%,$(wildcard cli/cmd_*.c))
# The kernels' C references and the replay format's reader and writer (kernels/replay_fmt.c, shared
# with kbench): libkref, linked into odsim, its tests and the fuzz targets.
KREF_SRCS := $(wildcard kernels/ref/*.c) kernels/replay_fmt.c
TEST_DIRS := $(filter-out fuzz,$(sort $(notdir $(patsubst %/,%,$(dir $(wildcard tests/*/*.c))))))

.PHONY: all deps run test kernels bench fuzz clean golden guard results floor runs install FORCE
.DEFAULT_GOAL := all

all: deps build/rel/odsim

# ---- dependencies -------------------------------------------------------------------------
DEPS_STAMP := build/.deps-ok
deps: $(DEPS_STAMP)
# Included, the stamp is remade (the packages installed) before anything else, and make then restarts
# with what was installed in view (mpicc decides MPI above).
ifeq ($(filter clean,$(MAKECMDGOALS)),)
-include $(DEPS_STAMP)
endif
$(DEPS_STAMP): Makefile
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null || exit 1; \
	fi
	@mkdir -p build && touch $@

# ---- generated sources --------------------------------------------------------------------
build/gen/%.pb-c.c build/gen/%.pb-c.h: traces/%.proto | $(DEPS_STAMP)
	@mkdir -p build/gen
	protoc-c --proto_path=traces --c_out=build/gen $<

# Regenerated on every make; replaced only when the version or commit changed.
build/gen/version.c: FORCE
	@mkdir -p build/gen
	@printf '/* generated by make: do not edit */\n#include "common/version.h"\nconst char odsim_version[] = "%s";\nconst char odsim_git_rev[] = "%s";\n' \
	   "$(VERSION)" "$(GIT_REV)" > $@.tmp && (cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@)

# Regenerated on every make; replaced only when the list of commands changed.
build/gen/cmdtab.c: FORCE
	@mkdir -p build/gen
	@{ echo '/* generated by make from cli/cmd_*.c: do not edit */'; \
	   echo '#include "cli/cmd.h"'; \
	   for c in $(CMD_NAMES); do echo "extern const cmd_t cmd_$$c;"; done; \
	   echo 'const cmd_t *const cmd_table[] = {'; \
	   for c in $(CMD_NAMES); do echo "    &cmd_$$c,"; done; \
	   echo '    0};'; } > $@.tmp && (cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@)

# ---- per-mode rules -----------------------------------------------------------------------
define MODE_RULES
# cli/par.c is the one source MPI changes: switching MPI rebuilds it (and so relinks)
build/$(1)/.mpi$(MPI):
	@mkdir -p $$(dir $$@) && rm -f build/$(1)/.mpi[01] && touch $$@
build/$(1)/obj/cli/par.o: build/$(1)/.mpi$(MPI)

build/$(1)/obj/%.o: %.c | $(DEPS_STAMP) $(PROTO_H)
	@mkdir -p $$(dir $$@)
	@echo "  CC [$(1)] $$<"
	@$$(CC) $$(CFLAGS_COMMON) $$(MODE_$(1)_CFLAGS) $$(EXTRA_CFLAGS) -c $$< -o $$@

build/$(1)/obj/build/gen/%.o: build/gen/%.c | $(DEPS_STAMP) $(PROTO_H)
	@mkdir -p $$(dir $$@)
	@echo "  CC [$(1)] $$<"
	@$$(CC) $$(CFLAGS_COMMON) $$(MODE_$(1)_CFLAGS) -Wno-missing-prototypes -c $$< -o $$@

$(foreach m,$(MODULES),
build/$(1)/lib$(m).a: $$(patsubst %.c,build/$(1)/obj/%.o,$$(call srcs_of,$(m)))
	@mkdir -p $$(dir $$@)
	@rm -f $$@ && ar rcs $$@ $$^
)

build/$(1)/libkref.a: $$(patsubst %.c,build/$(1)/obj/%.o,$(KREF_SRCS))
	@mkdir -p $$(dir $$@)
	@rm -f $$@ && ar rcs $$@ $$^

# odsim quality links the C references of the kernels' selection (kernels/ref/select.h)
build/$(1)/odsim: build/$(1)/obj/cli/main.o $$(patsubst %.c,build/$(1)/obj/%.o,$(CLI_SRCS)) \
                  build/$(1)/obj/build/gen/cmdtab.o $$(foreach m,$$(LIBDEPS_cli),build/$(1)/lib$$(m).a) build/$(1)/libkref.a
	@echo "  LD [$(1)] $$@"
	@$$(CC) $$(MODE_$(1)_LDFLAGS) -o $$@ $$(filter %.o,$$^) $$(foreach m,$$(LIBDEPS_cli),build/$(1)/lib$$(m).a) \
	    build/$(1)/libkref.a $$(LDLIBS) $$(MODE_$(1)_MPI)

# One Criterion binary per tests/<dir>; tests/cli links the CLI objects too. libkref comes last: user
# plans (models/uplan.h) and the validation module's replay workload generator (validation/wlgen.h)
# call the replay format's code.
$(foreach t,$(TEST_DIRS),
build/$(1)/tests/test_$(t): $$(patsubst %.c,build/$(1)/obj/%.o,$$(wildcard tests/$(t)/*.c)) \
      $$(if $$(filter cli,$(t)),$$(patsubst %.c,build/$(1)/obj/%.o,$(CLI_SRCS)) build/$(1)/obj/build/gen/cmdtab.o) \
      $$(if $$(filter kernels,$(t)),,$$(foreach m,$$(or $$(TESTLIBS_$(t)),$$(LIBDEPS_$(t)),$$(LIBDEPS_cli)),build/$(1)/lib$$(m).a)) \
      $$(if $$(filter cli kernels models validation,$(t)),build/$(1)/libkref.a)
	@mkdir -p $$(dir $$@)
	@echo "  LD [$(1)] $$@"
	@$$(CC) $$(MODE_$(1)_LDFLAGS) -o $$@ $$(filter %.o,$$^) $$(filter %.a,$$^) $$(LDLIBS) $$(MODE_$(1)_MPI) -lcriterion
)
endef
$(foreach mode,$(MODES),$(eval $(call MODE_RULES,$(mode))))

-include $(shell find build -name '*.d' 2>/dev/null)

# ---- user-facing targets ------------------------------------------------------------------
PREFIX  ?= /usr/local
# The data an installed odsim reads (docs/data-root.md): catalogs, profiles, scenarios, traces, and
# the measured data, held-out rule and seeds that validate and fit read.
INSTALL_DATA := models/catalog models/calib scenarios traces/data validation/data validation/workloads validation/heldout.yaml validation/seeds.yaml validation/trust.yaml
install: build/rel/odsim
	@install -D -m 755 build/rel/odsim $(DESTDIR)$(PREFIX)/bin/odsim
	@for d in $(INSTALL_DATA); do \
	  if [ -d $$d ]; then find $$d -type f | while read -r f; do install -D -m 644 "$$f" "$(DESTDIR)$(PREFIX)/share/odsim/$$f"; done; \
	  else install -D -m 644 $$d $(DESTDIR)$(PREFIX)/share/odsim/$$d; fi; done
	@echo "installed $(DESTDIR)$(PREFIX)/bin/odsim, data in $(DESTDIR)$(PREFIX)/share/odsim"

# With MPI and more than one core, the default study's points are spread over one rank per core
# (cli/par.h: the output is byte-identical to the serial run's, tests/e2e/mpi.sh).
NPROC := $(shell nproc 2>/dev/null || echo 1)
RUN_RANKS := $(if $(filter 1,$(MPI)),$(if $(filter-out 0 1,$(NPROC)),$(NPROC)))
run: all
ifneq ($(RUN_RANKS),)
	@echo "odsim run scenarios/default.yaml, its points over $(RUN_RANKS) MPI ranks (one per core)"
	@OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
	  mpirun --oversubscribe --mca btl self,vader -np $(RUN_RANKS) ./build/rel/odsim run scenarios/default.yaml
else
	./build/rel/odsim run scenarios/default.yaml
endif

TEST_BINS_rel := $(foreach t,$(TEST_DIRS),build/rel/tests/test_$(t))
TEST_BINS_san := $(foreach t,$(TEST_DIRS),build/san/tests/test_$(t))

# Each fuzz target linked with tests/fuzz/replay.c in the sanitizer build: `make test` replays its
# committed seeds and corpus (tests/e2e/fuzz_corpora.sh); `make fuzz` builds the libFuzzer ones.
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_REPLAY  := $(foreach t,$(FUZZ_TARGETS),build/san/fuzz/$(t))
.SECONDARY: $(foreach t,$(FUZZ_TARGETS) replay,build/san/obj/tests/fuzz/$(t).o)
build/san/fuzz/%: build/san/obj/tests/fuzz/%.o build/san/obj/tests/fuzz/replay.o $(patsubst %.c,build/san/obj/%.o,$(CLI_SRCS)) \
                  build/san/obj/build/gen/cmdtab.o $(foreach m,$(LIBDEPS_cli),build/san/lib$(m).a) build/san/libkref.a
	@mkdir -p $(dir $@)
	@echo "  LD [san] $@"
	@$(CC) $(MODE_san_LDFLAGS) -o $@ $(filter %.o,$^) $(filter %.a,$^) $(LDLIBS)

test: deps $(TEST_BINS_rel) $(TEST_BINS_san) $(FUZZ_REPLAY) build/rel/odsim build/dbg/odsim build/san/odsim
	@ODSIM_ROOT=$(CURDIR) ./tests/run_all.sh $(TEST_BINS_rel) $(TEST_BINS_san)

# The validation guard: re-fits the committed H200 data and fails when a held-out group exceeds 5%
# median or 15% max absolute error. `make test` runs it too; this runs it alone.
guard: deps build/rel/tests/test_validation build/rel/odsim
	./build/rel/tests/test_validation --filter 'guard/*'

# validation/results/ is built, not committed (.gitignore): `make results` (the fit's plots and the
# held-out validation of the committed profile), `make floor` and `make runs` write it.
RESULTS := validation/results
results: deps build/rel/odsim
	@mkdir -p $(RESULTS)
	./build/rel/odsim fit validation/data/h200 -o $(RESULTS)/h200.yaml --profile h200-pcie5-vm --plots $(RESULTS) > $(RESULTS)/fit.txt
	./build/rel/odsim validate validation/data/h200 --out $(RESULTS) > /dev/null
	@sed -n '/^group summary/,/^$$/p' $(RESULTS)/validate.txt

# The repeats: every validation/data/h200-*/ holding all four suites' CSVs (validation/data/README.md
# says which are kept and why).
SUITES := link kernels step concurrency
REPEATS := $(sort $(foreach d,$(wildcard validation/data/h200-*/),              $(if $(strip $(foreach s,$(SUITES),$(if $(wildcard $(d)$(s).csv),,missing))),,$(patsubst %/,%,$(d)))))

# Every repeat fitted and validated on its own with the current model, into
# validation/results/<run>/ (the profile, the fit's and validation's text, the cases' CSV).
runs: deps build/rel/odsim
	@for r in $(REPEATS); do \
	  d=$(RESULTS)/$${r#validation/data/}; \
	  mkdir -p $$d && \
	  ./build/rel/odsim fit $$r --device h200 -o $$d/h200.yaml > $$d/fit.txt 2>&1 && \
	  ./build/rel/odsim validate $$r --device h200 --calib $$d/h200.yaml --out $$d > /dev/null && \
	  rm -f $$d/validate.json $$d/validate.dat $$d/validate.gp $$d/validate.svg $$d/validate.png && \
	  echo "$$r: $$(sed -n '/^group summary/,/^$$/p' $$d/validate.txt | awk 'NR > 1 && NF > 3 {printf "%s %s/%s  ", $$1, $$5, $$6}')" \
	  || exit 1; \
	done

# The run-to-run floor: the primary run's held-out cases against each repeat (validate --repeat),
# the differences no prediction can be expected to beat; then the predictions with each case's own
# floor over all repeats (validate --floor, validation/results/floor/).
floor: deps build/rel/odsim
	@mkdir -p $(RESULTS)
	@for r in $(REPEATS); do \
	  echo "== validation/data/h200 against $$r (./build/rel/odsim validate validation/data/h200 --repeat $$r)"; \
	  ./build/rel/odsim validate validation/data/h200 --repeat $$r | sed -n '/^group summary/,/^$$/p'; \
	done > $(RESULTS)/floor.txt.tmp
	@echo "== the predictions, each value against its case's floor over the runs above (validation/results/floor/)" >> $(RESULTS)/floor.txt.tmp
	@./build/rel/odsim validate validation/data/h200 $(foreach r,$(REPEATS),--floor $(r)) \
	  --out $(RESULTS)/floor > $(RESULTS)/floor.out.tmp
	@sed -n '/^group summary/,/^$$/p' $(RESULTS)/floor.out.tmp >> $(RESULTS)/floor.txt.tmp
	@rm -f $(RESULTS)/floor.out.tmp
	@mv $(RESULTS)/floor.txt.tmp $(RESULTS)/floor.txt
	@cat $(RESULTS)/floor.txt

kernels:
	@$(MAKE) --no-print-directory -C kernels CUDA_ARCH=$(CUDA_ARCH)

# BENCH_TURNS: turns of the large trace of the memory benchmark (10000000 for issue 29's case).
BENCH_TURNS ?= 1000000
bench: all
	./build/rel/odsim bench
	@echo "stress profile (scenarios/bench_stress.yaml), one simulated hour, coarse mode:"
	./build/rel/odsim run scenarios/bench_stress.yaml --set serving.coarse=true --timing > /dev/null
	@echo "peak memory against trace length (tests/bench/memory.sh; BENCH_TURNS=$(BENCH_TURNS)):"
	@BENCH_TURNS=$(BENCH_TURNS) ODSIM_ROOT=$(CURDIR) ./tests/bench/memory.sh

fuzz: deps $(PROTO_H) build/gen/cmdtab.c build/gen/version.c
	@mkdir -p build/fuzz
	@set -e; for t in $(FUZZ_TARGETS); do \
	  srcs="$$(for m in $(MODULES); do ls $$m/*.c $$m/*/*.c 2>/dev/null || true; done) $(PROTO_C)"; \
	  clang $(CSTD) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I. -Ibuild/gen -DODSIM_VERSION=\"$(VERSION)\" \
	    tests/fuzz/$$t.c $$srcs $(CLI_SRCS) $(KREF_SRCS) build/gen/cmdtab.c build/gen/version.c \
	    -o build/fuzz/$$t $(LDLIBS); \
	  mkdir -p build/fuzz/corpus_$$t; \
	  seeds=""; for d in tests/fuzz/seeds/$$t tests/fuzz/corpus/$$t; do if [ -d $$d ]; then seeds="$$seeds $$d"; fi; done; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  ./build/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 build/fuzz/corpus_$$t $$seeds 2>&1 | tail -3; \
	done

clean:
	rm -rf build
	@$(MAKE) --no-print-directory -C kernels clean 2>/dev/null || true

# Rewrites the golden report of the default scenario on the frozen profile tests/data/golden_calib.yaml
# (a reviewed change; CI only compares, tests/e2e/golden.sh).
golden: all
	./build/rel/odsim run scenarios/default.yaml --set calibration=tests/data/golden_calib.yaml | sed '/^odsim [0-9][0-9.]* (/d' > tests/golden/default.txt
