# make test: gofmt check, go vet, and the whole test suite with -race and
# -shuffle=on, against real servers the tests start themselves (the
# servers target installs them when missing).
# Every package is compiled first (its test binary run with no test), so
# that no compilation shares the machine with a test that times calls;
# then two packages are tested at a time (-p 2), and -parallel 8 runs up
# to eight tests of a package at once (conformance configurations among
# them: their clauses mostly sleep, and the suite runs each
# configuration's timing clauses with no clause of another beside them;
# 16 at once, with the quota clauses, stalled timed calls for seconds on
# a 2-core machine). ALONE runs last, one package at a time:
# faults (calls timed through outages, with slack for scheduling delay
# only), drivers/postgres (its clusters' initdb and backends would take
# the cores from another package's timed calls) and drivers/valkey (beside
# drivers/redis, the two packages' clusters and Sentinels overran timed
# clauses on a 2-core machine: a pending claim read 2s after its Hit).
GO ?= go
PKGS ?= ./...
# Modules of their own, which the root's ./... does not enter, tested,
# vetted and benchmarked with it: fleetotel (OpenTelemetry, kept out of the
# library's dependencies), bench/ (make compare's commands; its
# benchmarks against a server are make compare, not make bench) and
# cmd/fleetstore (the command: serve's YAML, Prometheus and sinks, kept out
# of the library's dependencies too).
MODULES ?= fleetotel bench cmd/fleetstore
# Each module is built from its own go.mod, as its users build it: the
# root's go.work (which lets `go run ./cmd/fleetstore` work from the root)
# is not used here.
export GOWORK = off

.PHONY: test servers fmt vet bench check compare

TESTFLAGS ?= -race -shuffle=on -count=1 -p 2 -parallel 8
ALONE ?= github.com/fleetstore/fleetstore/drivers/valkey github.com/fleetstore/fleetstore/drivers/postgres \
	github.com/fleetstore/fleetstore/faults

# The servers are installed while the packages compile (apt waits on the
# network and dpkg, the compiler on the cores); the race-built packages
# serve go vet too (-race: one compilation of every dependency, not one
# for vet and one for the tests).
test: fmt
	@$(MAKE) --no-print-directory servers & servers=$$!; \
	echo "$(GO) test $(TESTFLAGS) -run '^$$' $(PKGS) (compile only)"; \
	$(GO) test $(TESTFLAGS) -run '^$$' $(PKGS) >/dev/null; compiled=$$?; \
	wait $$servers && [ $$compiled = 0 ]
	@$(MAKE) --no-print-directory vet VETFLAGS=-race
	@pkgs=$$($(GO) list $(PKGS)) || exit 1; \
	rest=$$(echo "$$pkgs" | grep -vxF $(addprefix -e ,$(ALONE))); \
	echo "$(GO) test $(TESTFLAGS) -timeout 30m $(PKGS) (but $(ALONE), then each alone)"; \
	status=0; \
	$(GO) test $(TESTFLAGS) -timeout 30m $$rest || status=1; \
	for p in $(ALONE); do \
		if echo "$$pkgs" | grep -qxF $$p; then $(GO) test $(TESTFLAGS) -timeout 30m $$p || status=1; fi; \
	done; \
	exit $$status
	@for m in $(MODULES); do echo "cd $$m && $(GO) test ./..."; (cd $$m && $(GO) test $(TESTFLAGS) -timeout 10m ./...) || exit 1; done

# Install the servers the driver tests start (they pick free loopback ports
# in temp dirs; nothing is left running): redis-server, redis-sentinel,
# memcached (built with TLS: the memcacheds:// tests run it with -Z) and
# postgresql (its binaries in /usr/lib/postgresql/N/bin, off PATH: the
# tests find them there and run initdb as the user postgres) from
# Debian's own suites, valkey-server and valkey-sentinel from bookworm-backports
# on Debian 12 (which has no valkey in its main suite; elsewhere from the main
# suite). The backports suite is added as one apt source file of its own,
# unless the machine has it already, on the mirror the machine's own apt
# sources serve bookworm from (as apt reads them: apt-get indextargets),
# and used only with -t for valkey;
# the machine's other apt sources are left as they are. Only the services this
# step installs are stopped (the tests start their own servers): a server
# the machine already ran is left running. Needs root on Debian;
# elsewhere install them yourself, or the driver tests skip (and fail when
# CI is set).
BACKPORTS_LIST ?= /etc/apt/sources.list.d/fleetstore-bookworm-backports.list
servers:
	@missing=""; \
	for bin in redis-server:redis-server redis-sentinel:redis-sentinel memcached:memcached; do \
		command -v $${bin%%:*} >/dev/null 2>&1 || missing="$$missing $${bin#*:}"; \
	done; \
	[ -x /usr/lib/postgresql/15/bin/initdb ] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		missing="$$missing postgresql"; \
	valkey=""; \
	command -v valkey-server >/dev/null 2>&1 || valkey="$$valkey valkey-server"; \
	command -v valkey-sentinel >/dev/null 2>&1 || valkey="$$valkey valkey-sentinel"; \
	if [ -z "$$missing" ] && [ -z "$$valkey" ]; then exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1 || [ "$$(id -u)" != 0 ]; then \
		echo "missing$$missing$$valkey: driver tests will skip and make compare cannot run (install them, or run as root on Debian)"; \
		exit 0; \
	fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	suite=""; \
	if [ -n "$$valkey" ] && grep -qs 'VERSION_CODENAME=bookworm' /etc/os-release; then \
		suite="-t bookworm-backports"; \
		if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then \
			mirror=$$(apt-get indextargets --no-release-info --format '$$(REPO_URI)' \
				'Release: bookworm' 'Target-Of: deb' | head -n 1); \
			if [ -z "$$mirror" ]; then \
				echo "no apt source serves bookworm, so no bookworm-backports to install$$valkey from: install it yourself"; \
				valkey=""; suite=""; \
			else \
				echo "adding the bookworm-backports apt source ($(BACKPORTS_LIST), $$mirror) for valkey"; \
				echo "deb $$mirror bookworm-backports main" > $(BACKPORTS_LIST); \
			fi; \
		fi; \
	fi; \
	if [ -z "$$missing$$valkey" ]; then exit 0; fi; \
	echo "installing$$missing$$valkey"; \
	apt-get update -qq; \
	if [ -n "$$missing" ]; then apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; fi; \
	if [ -n "$$valkey" ]; then apt-get install -y -qq --no-install-recommends $$suite $$valkey >/dev/null || exit 1; fi; \
	for svc in $$missing $$valkey; do \
		systemctl disable --now $$svc >/dev/null 2>&1 || service $$svc stop >/dev/null 2>&1 || true; \
	done; \
	true

fmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

VETFLAGS ?=
vet:
	$(GO) vet $(VETFLAGS) $(PKGS)
	@for m in $(MODULES); do (cd $$m && $(GO) vet $(VETFLAGS) ./...) || exit 1; done

# Go benchmarks of the memory driver's Hit (ns/op, allocs/op), with and
# without an observer (fleetotel's BenchmarkHit: OpenTelemetry's cost).
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	@for m in $(MODULES); do (cd $$m && $(GO) test -run '^$$' -bench . -benchmem ./...) || exit 1; done

# The contract checked against FLEETSTORE_URL (default memory://).
check:
	cd cmd/fleetstore && $(GO) run . check

# fleetstore side by side with redis_rate, throttled and a plain PING
# (bench/, its own module): starts redis-server on a free loopback port,
# prints the table. JSON=1 prints only the JSON rows (one per line);
# COMPARE_FLAGS adds flags, e.g. COMPARE_FLAGS="-d 10s -md". The servers
# target runs first, its messages on stderr so stdout stays the rows.
compare:
	@$(MAKE) --no-print-directory servers >&2
	@cd bench && $(GO) run ./cmd/compare $(if $(JSON),-json) $(COMPARE_FLAGS)
