# denv: build, test, fuzz, install. Run ./configure first (make check runs it).
# Objects go to $(BUILD) (default build/); the programs to bin/.
# BUILD may be overridden so that several builds can run side by side.

-include config.mk

BUILD ?= build
# Threads, for the HTTP client's name lookups (src/http/resolve.c). configure
# writes it; this default serves a config.mk written before it did.
PTHREAD_FLAGS ?= -pthread
PREFIX ?= /usr/local
FUZZ_SECONDS ?= 60
CC ?= cc

WARN = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
       -Wno-unused-parameter -Wformat=2 -Wvla
# _GNU_SOURCE: the sidecar needs Linux calls (setns, pipe2, getrandom) beyond POSIX.
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O2 $(WARN) -Isrc -It $(LIBS_CFLAGS) $(PTHREAD_FLAGS) $(CONFIG_CFLAGS) $(CFLAGS)
SAN_FLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
SAN_CFLAGS = $(subst -O2,-O1,$(ALL_CFLAGS)) $(SAN_FLAGS)

# Library modules, lowest first. Each is src/<m>/*.c with one header src/<m>/<m>.h.
LIB_MODULES = base json yaml tar http ws store spec
module_srcs = $(wildcard src/$(1)/*.c src/$(1)/*/*.c)
LIB_SRCS = $(foreach m,$(LIB_MODULES),$(call module_srcs,$(m)))

# What each module's tests (t/unit/<module>-*.c) and fuzz targets link.
DEPS_base  = base
DEPS_json  = base json
DEPS_yaml  = base json yaml
DEPS_tar   = base tar
DEPS_http  = base json http
DEPS_ws    = base json http ws
DEPS_store = base json store
DEPS_spec  = base json yaml spec
deps_of = $(if $(DEPS_$(1)),$(DEPS_$(1)),$(LIB_MODULES))
# Tests of a program (t/unit/cp-*.c, sidecar-*.c, cli-*.c) also link that
# program's sources, all but its main.c.
prog_srcs = $(filter-out src/$(1)/main.c,$(call module_srcs,$(1)))
objs_of = $(foreach m,$(call deps_of,$(1)),$(patsubst %.c,$(2)/%.o,$(call module_srcs,$(m)))) \
	$(if $(filter cp sidecar cli,$(1)),$(patsubst %.c,$(2)/%.o,$(call prog_srcs,$(1))))
module_of = $(firstword $(subst -, ,$(1)))

# Programs: each from its own directory plus the library.
CP_SRCS  = $(call module_srcs,cp)
SC_SRCS  = $(call module_srcs,sidecar)
CLI_SRCS = $(strip $(call module_srcs,cli) $(call module_srcs,tui))
BINS = $(if $(CP_SRCS),bin/denv-cp) $(if $(SC_SRCS),bin/denvd) $(if $(CLI_SRCS),bin/denv)
LIB_OBJS = $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)

UNITS = $(patsubst t/unit/%.c,%,$(wildcard t/unit/*.c))
UNIT_BINS = $(UNITS:%=$(BUILD)/t/%)
ASAN_UNIT_BINS = $(UNITS:%=$(BUILD)/t-asan/%)
# Programs that integration tests (t/helpers/<module>-*.c) and benchmarks
# (bench/<module>-*.c) drive; linked like unit tests, without the TAP harness.
HELPERS = $(patsubst t/helpers/%.c,%,$(wildcard t/helpers/*.c))
HELPER_BINS = $(HELPERS:%=$(BUILD)/helpers/%)
BENCHES = $(patsubst bench/%.c,%,$(wildcard bench/*.c))
BENCH_BINS = $(BENCHES:%=$(BUILD)/bench/%)
FUZZERS = $(patsubst fuzz/%.c,%,$(filter-out fuzz/replay.c,$(wildcard fuzz/*.c)))
REPLAY_BINS = $(FUZZERS:%=$(BUILD)/replay/%)

.PHONY: all check check-run units lint fuzz install clean demo images bench e2e-frameworks protections
all: $(BINS)

# Everything but these needs ./configure's config.mk.
ifeq ($(wildcard config.mk),)
ifneq ($(filter-out check clean lint demo images,$(or $(MAKECMDGOALS),all)),)
$(error config.mk is missing: run ./configure first (make check runs it for you))
endif
endif

# V=1 shows the full commands.
Q = $(if $(V),,@)
$(BUILD)/obj/src/tui/%.o $(BUILD)/asan/src/tui/%.o: ALL_CFLAGS += $(CURSES_CFLAGS)
# The version denvd reports (`denvd version`, its hello frame): the VERSION file.
DENV_VERSION := $(shell cat VERSION 2>/dev/null || echo dev)
SC_VERSIONED = $(patsubst %,src/sidecar/%.o,agent/agent hostinfo main)
$(SC_VERSIONED:%=$(BUILD)/obj/%) $(SC_VERSIONED:%=$(BUILD)/asan/%): VERSION
$(SC_VERSIONED:%=$(BUILD)/obj/%) $(SC_VERSIONED:%=$(BUILD)/asan/%): ALL_CFLAGS += -DDENVD_VERSION='"$(DENV_VERSION)"'
# The CLI's `denv version` reads the same file.
$(BUILD)/obj/src/cli/dispatch.o $(BUILD)/asan/src/cli/dispatch.o $(BUILD)/fuzzobj/src/cli/dispatch.o: VERSION
$(BUILD)/obj/src/cli/dispatch.o $(BUILD)/asan/src/cli/dispatch.o $(BUILD)/fuzzobj/src/cli/dispatch.o: ALL_CFLAGS += -DCLI_VERSION='"$(DENV_VERSION)"'

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<
$(BUILD)/asan/%.o: %.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC-SAN  $<")
	$(Q)$(CC) $(SAN_CFLAGS) -MMD -MP -c -o $@ $<
$(BUILD)/fuzzobj/%.o: %.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC-FUZZ $<")
	$(Q)$(FUZZ_CC) $(subst -O2,-O1,$(ALL_CFLAGS)) -fsanitize=address,undefined,fuzzer-no-link -MMD -MP -c -o $@ $<

bin/denv-cp: $(CP_SRCS:%.c=$(BUILD)/obj/%.o) $(LIB_OBJS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS)
bin/denvd: $(SC_SRCS:%.c=$(BUILD)/obj/%.o) $(LIB_OBJS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS)
bin/denv: $(CLI_SRCS:%.c=$(BUILD)/obj/%.o) $(LIB_OBJS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS) $(CURSES_LIBS)

# Unit tests: one program each, printing TAP.
define unit_rule
$(BUILD)/t/$(1): $(BUILD)/obj/t/unit/$(1).o $(BUILD)/obj/t/tap.o $(call objs_of,$(call module_of,$(1)),$(BUILD)/obj)
	@mkdir -p $$(@D)
	$$(Q)$$(CC) $$(ALL_CFLAGS) -o $$@ $$^ $$(LIBS) $$(CURSES_LIBS)
$(BUILD)/t-asan/$(1): $(BUILD)/asan/t/unit/$(1).o $(BUILD)/asan/t/tap.o $(call objs_of,$(call module_of,$(1)),$(BUILD)/asan)
	@mkdir -p $$(@D)
	$$(Q)$$(CC) $$(SAN_CFLAGS) -o $$@ $$^ $$(LIBS) $$(CURSES_LIBS)
endef
$(foreach u,$(UNITS),$(eval $(call unit_rule,$(u))))

define prog_rule
$(BUILD)/$(2)/$(1): $(BUILD)/obj/$(3)/$(1).o $(call objs_of,$(call module_of,$(1)),$(BUILD)/obj)
	@mkdir -p $$(@D)
	$$(Q)$$(CC) $$(ALL_CFLAGS) -o $$@ $$^ $$(LIBS)
endef
$(foreach h,$(HELPERS),$(eval $(call prog_rule,$(h),helpers,t/helpers)))
$(foreach b,$(BENCHES),$(eval $(call prog_rule,$(b),bench,bench)))

# Fuzz targets: fuzz/<module>[-what].c defines LLVMFuzzerTestOneInput. Built with
# libFuzzer for `make fuzz`, and with fuzz/replay.c (a main that feeds files) so
# that `make check` replays the seed corpus under the sanitizers without clang.
define fuzz_rule
$(BUILD)/fuzz/$(1): $(BUILD)/fuzzobj/fuzz/$(1).o $(call objs_of,$(call module_of,$(1)),$(BUILD)/fuzzobj)
	@mkdir -p $$(@D)
	$$(Q)$$(FUZZ_CC) -fsanitize=address,undefined,fuzzer $$(PTHREAD_FLAGS) -o $$@ $$^ $$(LIBS)
$(BUILD)/replay/$(1): $(BUILD)/asan/fuzz/$(1).o $(BUILD)/asan/fuzz/replay.o $(call objs_of,$(call module_of,$(1)),$(BUILD)/asan)
	@mkdir -p $$(@D)
	$$(Q)$$(CC) $$(SAN_CFLAGS) -o $$@ $$^ $$(LIBS)
endef
$(foreach f,$(FUZZERS),$(eval $(call fuzz_rule,$(f))))

units: $(UNIT_BINS) $(ASAN_UNIT_BINS) $(REPLAY_BINS) $(HELPER_BINS)

# Benchmarks print figures; they are not tests and assert no times.
# bench/run.sh runs every bench/*.sh and prints one table.
bench: all $(BENCH_BINS)
	@sh t/deps.sh bench
	@BUILD=$(BUILD) sh bench/run.sh

# The whole test suite from a fresh clone: packages, configure, build, tests.
check:
	@sh t/deps.sh
	@test -f config.mk || ./configure
	@$(MAKE) --no-print-directory check-run

check-run: all units
	@sh t/run-checks.sh "$(BUILD)"

lint:
	@sh t/lint.sh

# The protections table: the five protections and Karotte's attacks, per
# runtime (runc, gvisor) and storage (dir, btrfs); printed at check's end too.
protections: all
	@DENV_TOP=$(CURDIR) PATH=$(CURDIR)/bin:$(CURDIR)/python/.venv/bin:$$PATH sh t/protections.sh

fuzz:
	@test -n "$(FUZZ_CC)" || { echo "make fuzz needs clang with libFuzzer (Debian: clang libclang-rt-14-dev), then ./configure"; exit 1; }
	@$(MAKE) --no-print-directory $(FUZZERS:%=$(BUILD)/fuzz/%)
	@for f in $(FUZZERS); do \
		rm -rf $(BUILD)/fuzz/corpus-$$f; mkdir -p $(BUILD)/fuzz/corpus-$$f; \
		if [ -d fuzz/corpus/$$f ]; then cp fuzz/corpus/$$f/* $(BUILD)/fuzz/corpus-$$f/ 2>/dev/null; fi; \
		echo "fuzz: $$f for $(FUZZ_SECONDS)s"; \
		$(BUILD)/fuzz/$$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=65536 \
			-print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/$$f- \
			$(BUILD)/fuzz/corpus-$$f >$(BUILD)/fuzz/$$f.log 2>&1 \
			|| { tail -n 40 $(BUILD)/fuzz/$$f.log; echo "fuzz: $$f FAILED"; exit 1; }; \
		grep -E 'stat::number_of_executed_units' $(BUILD)/fuzz/$$f.log | sed "s/^/fuzz: $$f /"; \
	done; echo "fuzz: all targets clean"

install: all
	mkdir -p $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man8
	for b in $(BINS); do install -m 0755 $$b $(DESTDIR)$(PREFIX)/bin/; done
	for m in $(wildcard man/*.[158]); do \
		s=$${m##*.}; install -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/; done
	install -D -m 0644 contrib/bash-completion/denv \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/denv

demo:
	@sh t/demo.sh

# The images the tests and examples/ deploy, built here (no registry), and a
# table of what exists.
images:
	@sh t/images.sh

e2e-frameworks:
	@test -f t/e2e-frameworks.sh || { echo "make e2e-frameworks: the framework conformance suite is not written yet"; exit 2; }
	@sh t/e2e-frameworks.sh

clean:
	rm -rf $(BUILD) bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
