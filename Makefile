# xfrbench: `make demo` and `make test` work from a fresh Debian 12 machine (as root).
SHELL := /bin/bash
# rustup installs cargo here; uv sync needs it to build the rrsum extension.
export PATH := $(HOME)/.cargo/bin:$(PATH)
.DEFAULT_GOAL := help

VENV := .venv
XFRBENCH := $(VENV)/bin/xfrbench
PYTHON := $(VENV)/bin/python
# Debian packages the harness drives; installed only when missing.
APT_PACKAGES := bind9 bind9-utils bind9-dnsutils nsd knot knot-dnsutils knot-dnssecutils \
	pdns-server pdns-backend-sqlite3 pdns-tools sqlite3 \
	iproute2 iptables ethtool iperf3 iputils-ping prometheus procps curl rsync \
	docker.io docker-compose debootstrap openssh-server
# System services the packages above start; the harness runs its own servers, never these.
# Not ssh: a machine's own sshd is left alone; openssh-server (the lab's sshd binary), when
# setup installs it, is never started and is kept from starting (sshd_not_to_be_run).
SERVICES := named bind9 knot nsd pdns prometheus docker containerd

.PHONY: help setup apt-packages stop-services venv linkem demo test test-fast \
	test-build test-images lint bench clean compose-images compose-stop-dockerd

help:
	@echo "make setup   install Debian packages, build linkem, create $(VENV)"
	@echo "make demo    setup, then run the default scenario and print its results"
	@echo "make test    setup, then run every test (unit, system with root/netns/servers)"
	@echo "make test-fast  the unit tests and one system smoke test (about a minute)"
	@echo "make bench   setup, then run the benchmarks in bench/"
	@echo "make clean   remove what a killed run left behind, and build outputs"

setup: apt-packages stop-services venv linkem

apt-packages:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
		| grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		policy=/usr/sbin/policy-rc.d; own_policy=; \
		if [ ! -e $$policy ]; then printf '#!/bin/sh\nexit 101\n' > $$policy; \
			chmod 755 $$policy; own_policy=1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends $$missing; status=$$?; \
		if [ -n "$$own_policy" ]; then rm -f $$policy; fi; \
		if [ $$status = 0 ] && echo " $$missing " | grep -q " openssh-server "; then \
			touch /etc/ssh/sshd_not_to_be_run; update-rc.d ssh disable >/dev/null 2>&1; \
			if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then \
				systemctl disable ssh >/dev/null 2>&1; fi; \
		fi; \
		exit $$status; \
	fi

# Debian starts packaged daemons on install where it can (apt-packages forbids it for the
# install itself with a policy-rc.d); stop and disable exactly those.
stop-services:
	@for s in $(SERVICES); do \
		if [ -x /etc/init.d/$$s ] && /etc/init.d/$$s status >/dev/null 2>&1; then \
			echo "stopping system service $$s"; /etc/init.d/$$s stop >/dev/null 2>&1 || true; \
		fi; \
		if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then \
			systemctl disable --now $$s >/dev/null 2>&1 || true; \
		fi; \
		update-rc.d $$s disable >/dev/null 2>&1 || true; \
	done

# uv sync also builds the rrsum extension (Rust, rrsum/) with cargo.
venv:
	@command -v uv >/dev/null || pip install -q uv
	@command -v cargo >/dev/null || { echo "cargo is missing: install Rust with rustup" \
		"(it builds linkem and the rrsum extension)"; exit 2; }
	uv sync --frozen --quiet

# The cargo workspace (Cargo.toml) builds into target/: linkem's binary is
# target/release/linkem.
linkem:
	@if [ -f linkem/Cargo.toml ]; then cargo build --release --quiet -p linkem; fi

# The default scenario: prints what the host offers, then runs quick.toml and its table.
demo: setup
	$(XFRBENCH) doctor
	$(XFRBENCH) run scenarios/quick.toml --report

# Debootstrapped Debian bases (cached by tag), then the images from servers/docker/; starts
# dockerd (no iptables, no bridge) when none answers.
compose-images: setup
	$(PYTHON) -m harness.compose.images --all

# Stops only the dockerd that compose-images or the compose tests started (by its pid file).
compose-stop-dockerd: venv
	$(PYTHON) -m harness.compose.images --stop-dockerd

# The benchmarks are scripts without a .py suffix, which ruff only reads when named.
BENCH_SCRIPTS := $(shell find bench -maxdepth 1 -type f ! -name '*.*')

lint: venv
	$(VENV)/bin/ruff check harness tests bench $(BENCH_SCRIPTS)
	$(VENV)/bin/ruff format --check harness tests bench $(BENCH_SCRIPTS)

# `make test`: what it installs and builds (setup, the test binaries, the compose images) and
# lint first, timed apart; then the tests, timed: cargo's, then pytest's in two runs. The
# first runs on PYTEST_WORKERS xdist workers, modules with a fixture of their own on one
# worker each (`xdist_group`): six on two cores, because the system tests mostly wait on
# servers, links, deploys and timeouts. Measured here, the first run's wall: 1,883 tests,
# 636 s at three workers (every worker busy to the end), 524 s at four; 1,968 tests,
# 515 s at four, 465 s at five, 452 s at six. The second runs the tests marked `alone`
# (only the files that have one: collecting them all takes 7 s) one after another, with
# nothing beside them: they assert durations, timing relations or CPU figures
# (tests/conftest.py).
# Each run lists its ten slowest tests. Every step runs even when one before it failed.
PYTEST_WORKERS ?= 6
ALONE_FILES = $(shell grep -rl --include='*.py' 'pytest.mark.alone' tests)
PYTEST_ARGS ?=
PYTEST := $(PYTHON) -m pytest --durations=10 $(PYTEST_ARGS)

test:
	@dockerd_before=$$(docker info >/dev/null 2>&1 && echo yes); start=$$(date +%s); \
	$(MAKE) --no-print-directory setup lint test-build test-images || exit $$?; \
	echo "== setup and lint took $$(( $$(date +%s) - start )) s"; \
	start=$$(date +%s); status=0; \
	echo "== tests: cargo test, pytest on $(PYTEST_WORKERS) workers, then the alone tests"; \
	cargo test --release --quiet --workspace || status=1; \
	$(PYTEST) -n $(PYTEST_WORKERS) --dist loadgroup -m "not alone" tests || status=1; \
	$(PYTEST) -m alone --continue-on-collection-errors $(ALONE_FILES) || status=1; \
	echo "== tests took $$(( $$(date +%s) - start )) s (setup apart)"; \
	if [ -z "$$dockerd_before" ]; then $(PYTHON) -m harness.compose.images --stop-dockerd; fi; \
	exit $$status

# cargo's test binaries: a build, so setup's (the tests' own run is then a fraction of a second).
test-build: setup
	cargo test --release --quiet --workspace --no-run

# The images tests/compose runs (built once, cached by tag): trixie's servers and router, and
# BIND 9.18 and 9.20 on bookworm for the upgrade gate (tests/compose/test_upgrade.py).
test-images: setup
	$(PYTHON) -m harness.compose.images --servers trixie --link-suite trixie
	$(PYTHON) -m harness.compose.images --servers bookworm,bookworm-backports --link-suite bookworm

# The unit tests and one tiny bind->bind transfer through run_scenario, on two workers (the
# unit tests keep a core busy each: a third would gain nothing).
test-fast: venv
	@start=$$(date +%s); \
	$(PYTEST) -n 2 tests/unit tests/system/test_smoke.py; status=$$?; \
	echo "== test-fast took $$(( $$(date +%s) - start )) s"; exit $$status

# Each benchmark prints its figures and records them in bench/README-*.md.
bench: setup
	$(PYTHON) bench/zonegen
	$(PYTHON) bench/link
	$(PYTHON) bench/pull
	$(PYTHON) bench/verify --sizes 1000000
	$(PYTHON) bench/transfers --quick
	$(PYTHON) bench/scale --only tld --records 1000000 --repeats 2
	$(PYTHON) bench/fleet --only hosts --sizes 1,16
	$(PYTHON) bench/overhead --only quick,transports,fanout

clean:
	@if [ -x $(XFRBENCH) ]; then $(XFRBENCH) clean || true; fi
	@if [ -x $(PYTHON) ]; then $(PYTHON) -m harness.compose.images --stop-dockerd || true; fi
	rm -rf zones/cache target linkem/target .pytest_cache .ruff_cache
