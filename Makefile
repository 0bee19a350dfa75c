# gpuop front door. `make` builds, `make check` runs every test, `make demo` runs the main job,
# `make deps` installs the Debian packages that building and testing need, `make fuzz` runs
# libFuzzer on every parser.
BUILD      ?= build
ASAN_BUILD ?= build-asan
MESON      ?= meson
SHELL      := /bin/bash

# Debian 12 packages: build, product libraries, test peers and tools. README says why each.
DEPS_PKGS := build-essential meson ninja-build pkg-config git \
	libyaml-dev libjansson-dev zlib1g-dev libgnutls28-dev libcurl4-openssl-dev libssl-dev libmicrohttpd-dev \
	libnghttp2-dev libmnl-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler libcmocka-dev \
	python3 python3-grpcio python3-grpc-tools python3-protobuf \
	prometheus wrk valgrind clang libclang-rt-14-dev clang-format jq curl procps iproute2 \
	libtomlplusplus-dev zlib1g-dev containerd docker.io \
	runc busybox-static python3-jsonschema python3-yaml \
	buildah ca-certificates \
	@node=nodejs @npm=npm
# The arm64 (Grace) cross build and its tests under emulation: Debian's cross toolchain, qemu-user
# and the arm64 builds of the libraries meson.build looks up (multiarch; deps.sh adds the arm64
# architecture to dpkg first). docs/arm64.md.
DEPS_CROSS_PKGS := gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user-static file \
	libc6-dev:arm64 pkgconf:arm64 libyaml-dev:arm64 libjansson-dev:arm64 \
	zlib1g-dev:arm64 libgnutls28-dev:arm64 libcurl4-openssl-dev:arm64 libssl-dev:arm64 \
	libmicrohttpd-dev:arm64 libnghttp2-dev:arm64 libmnl-dev:arm64 libprotobuf-c-dev:arm64 \
	libcmocka-dev:arm64 libtomlplusplus-dev:arm64
# The client tools the tests and the demo drive kubesim with (kubectl 1.32, helm 3.17): pinned,
# checksum-verified binaries fetched once into the build tree by scripts/tools.sh.
TOOLS      ?= $(BUILD)/tools
# `make cross ARCH=arm64`: the whole tree for another architecture in build-$(ARCH), with
# build-aux/cross/<triplet>.ini (its exe_wrapper runs the tests under qemu-user).
ARCH       ?= arm64
CROSS_TRIPLET_arm64 := aarch64-linux-gnu
CROSS_TRIPLET := $(CROSS_TRIPLET_$(ARCH))
CROSS_BUILD ?= build-$(ARCH)

.PHONY: all build check demo demo-arm64 deps deps-check deps-check-cross tools format format-check asan check-asan \
	check-asan-e2e fuzz clean bench image image-cross cross check-cross

all: build

deps:
	./scripts/deps.sh install $(DEPS_PKGS) $(DEPS_CROSS_PKGS)
	./scripts/tools.sh $(TOOLS)

tools:
	./scripts/tools.sh $(TOOLS)

deps-check:
	@./scripts/deps.sh check $(DEPS_PKGS)

$(BUILD)/build.ninja: | deps-check
	$(MESON) setup $(BUILD) -Dtools_dir=$(abspath $(TOOLS)) $(MESON_ARGS)

build: deps-check $(BUILD)/build.ninja
	ninja -C $(BUILD)

# Every test; the non-parallel ones (end to end) in two chains, each one test at a time, beside the
# others (tests/check.py).
# TEST_ARGS (test names, meson test options) runs those with meson test alone.
# A cross tree that exists is brought up to date first: kubelet-sim runs an arm64 node's pods
# from it (grace-e2e), and a stale one would run yesterday's programs.
check: build tools
	@if [ -f $(CROSS_BUILD)/build.ninja ]; then ninja -C $(CROSS_BUILD) $(CROSS_NODE_TARGETS); fi
ifeq ($(TEST_ARGS),)
	MESON=$(MESON) tests/check.py $(BUILD) -- --print-errorlogs
else
	$(MESON) test -C $(BUILD) --print-errorlogs $(TEST_ARGS)
endif

# The demo's Grace node (GH200) runs arm64 programs under qemu-user: with the cross toolchain
# installed (`make deps`), the programs a node runs are built for aarch64 in $(CROSS_BUILD) first
# (about a minute and a half from nothing on a 2-core machine; nothing once built). Without it,
# or with DEMO_ARM64=0, the node runs this machine's programs and the demo says so.
DEMO_ARM64 ?= 1
CROSS_NODE_TARGETS := gpuop gpuop-tomlx.so sim-image libnvidia-ml.so.1 libcuda.so.1

demo: build tools demo-arm64
	./scripts/demo.sh

demo-arm64:
	@if [ "$(DEMO_ARM64)" = 0 ]; then \
		echo "make demo: DEMO_ARM64=0: the Grace node runs this machine's programs"; \
	elif ./scripts/deps.sh present $(DEPS_CROSS_PKGS); then \
		$(MAKE) --no-print-directory $(CROSS_BUILD)/build.ninja && \
		ninja -C $(CROSS_BUILD) $(CROSS_NODE_TARGETS); \
	else \
		echo "make demo: no arm64 cross toolchain (make deps installs it): the Grace node runs this machine's programs"; \
	fi

# The gpuop image as an OCI archive ($(BUILD)/gpuop-image.oci.tar), built FROM scratch with
# buildah, pulling nothing; prints each image's compressed size (bench/RESULTS.md records them).
# By default an OCI image index of two images of the same version: amd64 from $(BUILD) and arm64
# from the cross build (only gpuop and gpuop-tomlx.so built there, not the whole tree: a minute or
# two from nothing). `make image IMAGE_ARCHS=amd64` builds the amd64 image alone, without the
# cross toolchain. `make image IMAGE_PUSH=docker://REGISTRY/gpuop/gpuop:VERSION` also pushes the
# index and both images. docs/arm64.md.
IMAGE_ARCHS ?= amd64 arm64
IMAGE_PUSH  ?=
image: build $(if $(filter arm64,$(IMAGE_ARCHS)),image-cross)
	@case "$(strip $(IMAGE_ARCHS))" in "amd64 arm64"|amd64) ;; \
	*) echo "make image: IMAGE_ARCHS=$(IMAGE_ARCHS) (known: amd64 arm64, or amd64)"; exit 2;; esac
	GPUOP_IMAGE_PUSH=$(IMAGE_PUSH) ./scripts/build-image.sh $(BUILD) $(BUILD)/gpuop-image.oci.tar \
		$(if $(filter arm64,$(IMAGE_ARCHS)),$(CROSS_BUILD))

# The arm64 image's programs in the cross build.
image-cross: $(CROSS_BUILD)/build.ninja
	@[ "$(ARCH)" = arm64 ] || { echo "make image: the image's second architecture is arm64 (ARCH=$(ARCH))"; exit 2; }
	ninja -C $(CROSS_BUILD) gpuop gpuop-tomlx.so

# The cross build needs neither the pinned client tools nor anything else run on this machine
# but the compilers and the generators (protoc-c, python3).
$(CROSS_BUILD)/build.ninja: | deps-check-cross
	@[ -n "$(CROSS_TRIPLET)" ] || { echo "make cross: unknown ARCH=$(ARCH) (known: arm64)"; exit 2; }
	$(MESON) setup $(CROSS_BUILD) --cross-file build-aux/cross/$(CROSS_TRIPLET).ini \
		-Dtools_dir=$(abspath $(TOOLS)) -Dnative_build_dir=$(abspath $(BUILD)) $(MESON_ARGS)

deps-check-cross:
	@./scripts/deps.sh check $(DEPS_CROSS_PKGS)

cross: $(CROSS_BUILD)/build.ninja
	ninja -C $(CROSS_BUILD)

# The arm64 test stage (.ci/run): the programs those tests need, then the tests listed in
# tests/cross/tests.txt under qemu-user; tests/cross/skipped.txt says why the others are not run.
# The same-answers test compares with the native build ($(BUILD)), built first.
check-cross: build $(CROSS_BUILD)/build.ninja
	./scripts/check-cross.sh $(CROSS_BUILD)

$(ASAN_BUILD)/build.ninja: | deps-check
	$(MESON) setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false \
		-Dbuildtype=debug -Dtools_dir=$(abspath $(TOOLS)) $(MESON_ARGS)

asan: deps-check $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)

ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 GPUOP_TEST_TIME_SCALE=3

check-asan: asan tools
ifeq ($(TEST_ARGS),)
	$(ASAN_ENV) GPUOP_CHECK_PROCESSES=$${GPUOP_CHECK_PROCESSES:-3} MESON=$(MESON) \
		tests/check.py $(ASAN_BUILD) --no-suite e2e -- --print-errorlogs --timeout-multiplier 3
else
	$(ASAN_ENV) $(MESON) test -C $(ASAN_BUILD) --print-errorlogs --timeout-multiplier 3 $(TEST_ARGS)
endif

# The end-to-end tests on simulated nodes (suite e2e) under the sanitizers: make check runs them
# in the normal build; check-asan leaves them out to keep CI short (docs/DEVELOPING.md).
check-asan-e2e: asan tools
	$(ASAN_ENV) $(MESON) test -C $(ASAN_BUILD) --print-errorlogs --timeout-multiplier 3 \
		--suite e2e

# libFuzzer on demand, not in CI (make check replays every committed corpus): every target for
# FUZZ_SECONDS each (FUZZ_TARGETS: only those), in build-fuzz/ (clang, ASan+UBSan).
# docs/DEVELOPING.md says how a crash it finds becomes a corpus file.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
fuzz:
	./scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

format:
	./scripts/format.sh fix

format-check:
	./scripts/format.sh check

bench: build tools
	./bench/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(CROSS_BUILD)
