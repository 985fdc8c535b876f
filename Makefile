# specprobe: `make demo` builds everything and traces the bundled demo target;
# `make test` runs every test (the BPF ones need root). See README.md.
GO      ?= go
# go-nvml's nvml.h marks functions deprecated that go-nvml still binds: the
# C compiler warns about each one when the package is built. cgo flags
# cannot be set for a dependency from this module, so the build here adds
# the flag (the default -O2 -g kept); a plain `go build` prints the warnings
# once, until the build cache holds the package (README "Building").
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
BIN     := bin/specprobe
DEMOCC  := gcc -O2 -g -fno-omit-frame-pointer -pthread -Wall -Wextra -Werror
OUT     := out

.PHONY: all build demo test vmtest trixie unit bench fuzz generate check-generated clean $(BIN)

all: build

build: $(BIN) demo/specdemo demo/specdemo-cet

$(BIN):
	$(GO) build -o $(BIN) ./cmd/specprobe

# The demo target, built twice: without and with -fcf-protection (functions
# starting with endbr64, as distro binaries do).
demo/specdemo: demo/specdemo.c
	$(DEMOCC) -fcf-protection=none -o $@ $<

demo/specdemo-cet: demo/specdemo.c
	$(DEMOCC) -fcf-protection=full -o $@ $<

demo: build
	./scripts/demo.sh $(OUT)

# Every package here (-p 1: the BPF tests check that no program of ours is
# left in the kernel, which another package's tests attaching at the same
# time would break), then the kernel matrix in QEMU guests, then what ran
# where (scripts/test.sh; docs/testing.md). Needs root for the BPF tests and
# the guests; fails when the Python tests ran nowhere.
test: build check-generated trixie
	$(GO) vet ./...
	./scripts/test.sh

# One kernel of the matrix, by hand: make vmtest KERNEL=6.1 [RUN=TestSGLangTarget]
# (KERNEL: 5.10, 6.1, 6.12, newest; RUN: a go test -run pattern, else the
# kernel's suite). Results in out/test/KERNEL.
KERNEL ?= 6.1
vmtest: build
	./scripts/vmtest.sh $(KERNEL) '$(RUN)'
	$(GO) run ./cmd/testreport summary -any out/test/$(KERNEL)

# Debian trixie's CPython 3.13 in a chroot, one of the interpreters the Python
# tests run on (internal/testinterp); it needs root and debootstrap, and
# without them its tests skip, saying so.
trixie:
	@if [ "$$(id -u)" = 0 ] && command -v debootstrap >/dev/null; then ./scripts/trixie-python.sh; \
	else echo "no Debian trixie python3.13 (needs root and debootstrap): its tests skip"; fi

# Tests that need neither root nor the demo binaries.
unit:
	$(GO) test -count=1 -short ./...

bench: build bench/callloop
	./scripts/bench.sh

bench/callloop: bench/callloop.c
	$(DEMOCC) -fcf-protection=full -o $@ $<

# The parsers of what a node's users control: specs, /proc files, ELF files.
# ELF seeds are whole binaries: keep the minimisation of new inputs short.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./probes
	$(GO) test -run '^$$' -fuzz FuzzParseMaps -fuzztime 30s ./internal/procfs
	$(GO) test -run '^$$' -fuzz FuzzParseStat -fuzztime 30s ./internal/procfs
	$(GO) test -run '^$$' -fuzz FuzzNewFile -fuzztime 60s -fuzzminimizetime 2s ./internal/elfsym
	$(GO) test -run '^$$' -fuzz FuzzBatchEval -fuzztime 60s ./pyproc
	$(GO) test -run '^$$' -fuzz FuzzDecodePyPayload -fuzztime 30s ./loader
	$(GO) test -run '^$$' -fuzz FuzzParseTitle -fuzztime 30s ./procgroup
	$(GO) test -run '^$$' -fuzz FuzzStructOffsets -fuzztime 60s -fuzzminimizetime 2s ./loader
	$(GO) test -run '^$$' -fuzz FuzzHdrAround -fuzztime 30s ./loader
	$(GO) test -run '^$$' -fuzz FuzzRedact -fuzztime 30s ./internal/redact

# Rebuild the BPF objects (needs clang-19: apt-get install clang-19 libbpf-dev).
generate:
	cd bpf && $(GO) generate

# CI: the committed objects must be what the C sources build to.
check-generated:
	@if command -v clang-19 >/dev/null; then \
		$(MAKE) --no-print-directory generate && git diff --exit-code --stat -- bpf/ \
		|| { echo "bpf/: generated objects are stale: run 'make generate' and commit"; exit 1; }; \
	else echo "check-generated: clang-19 not installed, not checking bpf/ objects"; fi

clean:
	rm -rf bin $(OUT) demo/specdemo demo/specdemo-cet bench/callloop
