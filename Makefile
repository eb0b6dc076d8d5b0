# make test: gofmt check, go vet, and the whole test suite with -race and
# -shuffle=on, against real servers the tests start themselves
# (redis-server, memcached: installed from Debian packages when missing).
# -p 1: one package at a time, so that the conformance clauses that measure
# a call against its budget are not starved of the machine's 2 cores by
# another package's servers.
GO ?= go
PKGS ?= ./...

.PHONY: test servers fmt vet bench check compare

test: servers fmt vet
	$(GO) test -race -shuffle=on -count=1 -p 1 -timeout 30m $(PKGS)

# Install the servers the driver tests start (they pick free loopback ports
# in temp dirs; nothing is left running). Needs root on Debian; elsewhere
# install them yourself, or the driver tests skip (and fail when CI is set).
servers:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v memcached >/dev/null 2>&1 || missing="$$missing memcached"; \
	if [ -n "$$missing" ]; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
			echo "installing$$missing"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
		else \
			echo "missing$$missing: driver tests will skip and make compare cannot run (install them, or run as root on Debian)"; \
		fi; \
	fi

fmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# Go benchmarks of the memory driver's Hit (ns/op, allocs/op).
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The contract checked against FLEETSTORE_URL (default memory://).
check:
	$(GO) run ./cmd/fleetstore check

# fleetstore side by side with redis_rate, throttled and a plain PING
# (bench/, its own module): starts redis-server on a free loopback port,
# prints the table. JSON=1 prints only the JSON rows (one per line);
# COMPARE_FLAGS adds flags, e.g. COMPARE_FLAGS="-d 10s -md". The servers
# target runs first, its messages on stderr so stdout stays the rows.
compare:
	@$(MAKE) --no-print-directory servers >&2
	@cd bench && $(GO) run ./cmd/compare $(if $(JSON),-json) $(COMPARE_FLAGS)
