# octet — GNU Make build.
#   make            build/liboctet.a, build/liboctet.so, build/octet
#   make test       build and run every test executable; last line "N passed, N failed"
#   make asan       the whole suite under ASan + UBSan (objects in build/asan/)
#   make demo       build and run the demo
#   make bench      build the benchmarks
#   make fuzz       libFuzzer targets (clang)
#   make CUDA=1     also compile src/kernels/cuda/*.cu with nvcc
#   make WERROR=1   warnings are errors (CI)
#   make wheel      build/wheel/octet-*.whl: the Python package with liboctet.so inside
#   make python     install that wheel into $(PYTHON)'s environment
#   make python-test  the Python package's tests alone (make test runs them too)
.DEFAULT_GOAL := all
SHELL := /bin/bash

CC      ?= cc
ifeq ($(origin CC),default)
CC := cc
endif
NVCC    ?= nvcc
BUILD   ?= build
CUDA    ?= 0
SAN     ?= 0
WERROR  ?= 0
OPT     ?= -O2

WARN := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wcast-qual -Wwrite-strings -Wundef -Wformat=2 -Wconversion \
        -Wdouble-promotion -Wvla -Wimplicit-fallthrough
ifeq ($(WERROR),1)
WARN += -Werror
endif

PKGS     := jansson libpcre2-8 libmicrohttpd openblas
DEPS_OK  := $(shell tools/deps.sh build >&2 && echo ok)
ifneq ($(DEPS_OK),ok)
$(error missing dependencies: see the apt-get line above)
endif
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))

CPPFLAGS += -Iinclude -Isrc -D_GNU_SOURCE -DPCRE2_CODE_UNIT_WIDTH=8
CFLAGS   += -std=c11 $(OPT) -g -fPIC -fopenmp -fno-fast-math $(WARN) $(PKG_CFLAGS) -MMD -MP
LDLIBS   += $(PKG_LIBS) -fopenmp -lm -lpthread

ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer \
           -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined,float-cast-overflow
endif

# Per-ISA files carry their own flags; one binary runs anywhere (runtime dispatch).
ISA_AVX2   := -mavx2 -mfma -mf16c
ISA_AVX512 := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq \
              -mavx512bf16 -mavx512vbmi

LIB_SRC := $(sort $(wildcard src/*/*.c src/*/*/*.c))
LIB_SRC := $(filter-out src/cli/%,$(LIB_SRC))
ifeq ($(CUDA),1)
LIB_SRC := $(filter-out src/kernels/cuda/stub.c src/kernels/cuda/stub_backend.c,$(LIB_SRC))
CU_SRC  := $(sort $(wildcard src/kernels/cuda/*.cu))
CU_OBJ  := $(CU_SRC:%.cu=$(BUILD)/%.o)
CUDA_HOME ?= /usr/local/cuda
NVFLAGS := -O3 -std=c++17 -lineinfo -Xcompiler -fPIC -Xcompiler -fvisibility=hidden \
           -Iinclude -Isrc -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_89,code=sm_89 \
           -MMD -MP
LDLIBS  += -L$(CUDA_HOME)/lib64 -lcublasLt -lcudart -lstdc++
CPPFLAGS += -DOCTET_CUDA=1
endif
CLI_SRC   := $(sort $(wildcard src/cli/*.c))
BENCH_SRC := $(sort $(wildcard bench/*.c))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_OBJ)
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/%.o) $(BENCH_SRC:%.c=$(BUILD)/%.o)

# liboctet.so exports only what include/octet/*.h mark OCT_API (docs/API.md);
# tests and the CLI link liboctet.a, where the internal symbols stay visible.
$(LIB_OBJ): CFLAGS += -fvisibility=hidden

TEST_SRC  := $(sort $(wildcard tests/test_*.c))
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_REPLAY := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/tests/%_replay)
FIXTURE_GZ  := $(wildcard tests/fixtures/*.gz)
FIXTURE_OUT := $(FIXTURE_GZ:tests/fixtures/%.gz=$(BUILD)/fixtures/%)

# The Python package (python/): pure Python over liboctet.so.  Wheels are
# built offline by an interpreter with setuptools and wheel (Debian:
# python3-setuptools python3-wheel): $(PYTHON) when it has them, else Debian's.
PYTHON   ?= python3
PY_BUILD ?= $(shell for p in $(PYTHON) /usr/bin/python3; do \
              $$p -c 'import setuptools, wheel' 2>/dev/null && { echo $$p; break; }; done)

.PHONY: all test asan demo bench fuzz format-check clean deps python wheel python-test
all: $(BUILD)/liboctet.a $(BUILD)/liboctet.so $(BUILD)/octet

$(BUILD)/liboctet.a: $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/liboctet.so: $(LIB_OBJ) src/liboctet.map
	$(CC) -shared -Wl,--version-script=src/liboctet.map -o $@ $(LIB_OBJ) $(LDFLAGS) $(LDLIBS)

$(BUILD)/octet: $(CLI_OBJ) $(BUILD)/liboctet.a
	$(CC) -o $@ $(CLI_OBJ) $(BUILD)/liboctet.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/%_avx2.o: %_avx2.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ISA_AVX2) -c $< -o $@

$(BUILD)/%_avx512.o: %_avx512.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ISA_AVX512) -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/tests/%: tests/%.c tests/testlib.h $(BUILD)/liboctet.a
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -o $@ $< $(BUILD)/liboctet.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/%_replay: tests/fuzz/%.c tests/fuzz/replay_main.c $(BUILD)/liboctet.a
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -o $@ $< tests/fuzz/replay_main.c $(BUILD)/liboctet.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/fixtures/%: tests/fixtures/%.gz
	@mkdir -p $(@D)
	gzip -dc $< > $@.tmp && mv $@.tmp $@

test: all $(TEST_BIN) $(FUZZ_REPLAY) $(FIXTURE_OUT)
	@tools/deps.sh test
	@BUILD=$(BUILD) PYTHON=$(PYTHON) SAN=$(SAN) tools/run_tests.sh $(TEST_BIN) $(FUZZ_REPLAY) \
	    tests/python/run

python-test: all
	@BUILD=$(BUILD) PYTHON=$(PYTHON) SAN=$(SAN) tests/python/run

wheel: $(BUILD)/liboctet.so
	@test -n "$(PY_BUILD)" || { echo "make wheel: needs a python3 with setuptools and wheel" \
	    "(apt-get install python3-setuptools python3-wheel)"; exit 1; }
	rm -rf $(BUILD)/wheel
	OCTET_LIB=$(abspath $(BUILD)/liboctet.so) $(PY_BUILD) -m pip wheel --no-build-isolation \
	    --no-index --no-deps -w $(BUILD)/wheel ./python

python: wheel
	$(PYTHON) -m pip install --no-index --force-reinstall $(BUILD)/wheel/octet-*.whl

asan:
	$(MAKE) BUILD=build/asan SAN=1 OPT=-O1 test

demo: all
	@BUILD=$(BUILD) tools/demo.sh

bench: all

FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
fuzz:
	$(MAKE) BUILD=build/fuzz CC=clang SAN=0 OPT=-O1 \
	    CFLAGS_EXTRA="-fsanitize=fuzzer-no-link,address -DJINJA_MAX_STEPS=2000000u" \
	    build/fuzz/liboctet.a
	@mkdir -p build/fuzz/bin
	@for f in $(FUZZ_SRC); do n=$$(basename $$f .c); \
	  clang $(CPPFLAGS) -Itests -g -O1 -fopenmp -fsanitize=fuzzer,address $$f build/fuzz/liboctet.a \
	    $(PKG_LIBS) -fopenmp -lm -lpthread -o build/fuzz/bin/$$n || exit 1; echo "built build/fuzz/bin/$$n"; done

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h' '*.cu')

clean:
	rm -rf build

CFLAGS += $(CFLAGS_EXTRA)
-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(CU_OBJ:.o=.d)
