# Gregor's everyday commands. `make run` starts a single-node cluster on
# localhost:9092 with data in ./data; `make test` runs the whole suite.
GO ?= go
GOFLAGS ?=
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: run build test test-short compat-deps fuzz bench vet

run:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/gregor serve

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/gregor ./cmd/gregor

# The full suite: unit tests with the race detector, the in-process and
# subprocess broker tests, real clients (compat) and brief fuzzing.
test: vet
	$(GO) test -race -count=1 -timeout 12m ./...
	cd compat && $(GO) test -race -count=1 -timeout 10m ./...
	$(MAKE) fuzz FUZZTIME=5s

vet:
	$(GO) vet ./...
	cd compat && $(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)

test-short:
	$(GO) test -short -count=1 ./...

# Installs what the compat tests need: kcat from Debian. Idempotent.
compat-deps:
	@command -v kcat >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat)

FUZZTIME ?= 20s
fuzz:
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzParseRequest$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzValidateBatch$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzDecompress$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./protocol ./storage ./broker
