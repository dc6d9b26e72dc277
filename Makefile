# The README's commands. `make help` lists them.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# make dev PORT=8001; make ops ARGS="trace call-1"
PORT ?= 8000
ARGS ?= --help

# A command for a person (ops, links) that failed has said why on stderr; at a terminal make's own
# "*** [Makefile: ops] Error 1" would only repeat it, so it ends there. Not at a terminal (a script,
# CI) the failure stays a failure.
QUIET_FAIL = if [ -t 2 ]; then exit 0; else exit $${code:-1}; fi

.DEFAULT_GOAL := help
.PHONY: help install system-deps links dev ops test lint format migrate serve relay bench failover chaos scale-out upgrade mcp-replicas mcp-conformance pooler instructions citus model full-disk netfaults clocks
.PHONY: kube-validate kube-rules kube
.PHONY: frameworks

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' \
		'{name[NR] = $$1; text[NR] = $$2; if (length($$1) > width) width = length($$1)} \
		END {format = "  %-" width "s  %s\n"; for (i = 1; i <= NR; i++) printf format, name[i], text[i]}'

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	@echo "install: creating $(VENV) and installing the project with its dev extras (about a minute the first time)"
	$(PY) -m pip install --progress-bar on --upgrade pip
	$(PY) -m pip install --progress-bar on -e '.[dev]'
	touch $@

install: $(VENV)/.installed ## create .venv and install the project with its test and dev extras

dev: install ## the whole stack on this machine (embedded Postgres unless DATABASE_URL is set); PORT=8000
	$(PY) -m service dev --port $(PORT)

links: ## print the running make dev's addresses and sign-in links again (from .dev/links)
	@cat .dev/links 2>/dev/null || { echo "links: no dev stack runs from this folder; start one with make dev" >&2; $(QUIET_FAIL); }

ops: install ## operator commands beside make dev: make ops ARGS="trace call-1" (ARGS="--help" lists them)
	@$(PY) -m service ops $(ARGS) || { code=$$?; $(QUIET_FAIL); }

system-deps: ## what the tests need from the system (chromium, nginx, promtool, PostgreSQL 15, npm, PgBouncer, faketime), from apt when missing
	@scripts/system-deps.sh

test: install system-deps ## the full test suite against a real Postgres (TEST_DATABASE_URL, Docker, or embedded)
	$(PY) -m pytest $(PYTEST_ARGS)

lint: install ## ruff, mypy and the import layers (lint-imports)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

format: install ## apply ruff's formatting and safe fixes
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

migrate: install ## alembic upgrade head against DATABASE_URL
	$(PY) -m service migrate

serve: install ## the HTTP service against DATABASE_URL
	$(PY) -m service serve

relay: install ## the outbox relay against DATABASE_URL
	$(PY) -m relay

bench: install ## the benchmarks (they print numbers; see bench/README.md; make instructions runs the instruction checks)
	$(PY) -m bench.tool_cycles
	$(PY) -m bench.call_cost
	$(PY) -m bench.mcp_cost
	$(PY) -m bench.relay_drain
	$(PY) -m bench.ending_latency
	$(PY) -m bench.look_round_trips
	$(PY) -m bench.capacity

instructions: install ## CI check: Python instructions per tool call and database instructions per cycle within 5 % of their baselines (callgrind, ~5 min)
	@command -v valgrind >/dev/null || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends valgrind; }
	@test -x /usr/lib/postgresql/15/bin/postgres || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql-15; }
	$(PY) -m bench.instructions_check
	$(PY) -m bench.db_instructions_check

failover: install ## Patroni + etcd on this machine under load: a switchover, a crashed primary, the checks
	@command -v patroni >/dev/null && command -v etcd >/dev/null && test -x /usr/lib/postgresql/15/bin/initdb || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			patroni etcd-server postgresql-15; }
	$(PY) -u -m rigs.failover

chaos: install ## minutes of load while Postgres, the service and the relays are killed; the checks
	@test -x /usr/lib/postgresql/15/bin/initdb || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql-15; }
	$(PY) -u -m rigs.chaos

pooler: install ## PgBouncer (transaction mode, then session mode) in front of two replicas and two relays under load; the checks
	@command -v pgbouncer >/dev/null || test -x /usr/sbin/pgbouncer || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends pgbouncer; }
	@test -x /usr/lib/postgresql/15/bin/initdb || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql-15; }
	$(PY) -u -m rigs.pooler --mode transaction $(POOLER_ARGS)
	$(PY) -u -m rigs.pooler --mode session $(POOLER_ARGS)

citus: install ## a Citus 13 coordinator and two workers (installed extension, or built from CITUS_SRC's tarball); migrate, distribute, two replicas, a relay per worker, load, a worker restart, the checks
	@test -x /usr/lib/postgresql/15/bin/initdb || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql-15; }
	$(PY) -u -m rigs.citus $(CITUS_ARGS)

scale-out: install ## two serve processes on one port and two relays against one of each; races checked
	$(PY) -u -m rigs.scale_out

mcp-replicas: install ## two serve replicas behind nginx round-robin: 200 MCP tasks started, read and cancelled across them
	@command -v nginx >/dev/null || test -x /usr/sbin/nginx || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nginx-light; }
	$(PY) -u -m rigs.mcp_replicas

upgrade: install ## the previous release and this one side by side under load while migrate runs; the checks
	$(PY) -u -m rigs.upgrade $(UPGRADE_ARGS)

model: install ## the protocol's Promela models (model/) checked by spin: every property holds, every reverted bug is caught
	@command -v spin >/dev/null && command -v cc >/dev/null || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends spin gcc; }
	$(PY) -u -m rigs.protocol_model

full-disk: install ## Postgres' WAL disk fills under load (a tmpfs; needs root), then space returns: 503s with the error body, /readyz, no spinning relay, recovery by itself; the checks
	@test -x /usr/lib/postgresql/15/bin/initdb || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql-15; }
	$(PY) -u -m rigs.full_disk $(FULL_DISK_ARGS)

netfaults: install ## Postgres, two replicas, two relays and the Agent in network namespaces (needs root): slow, lossy and partitioned links under load; the checks
	@command -v ip >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iproute2; }
	@command -v iptables >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iptables; }
	@test -e /usr/include/libnetfilter_queue/libnetfilter_queue.h && command -v gcc >/dev/null || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libnetfilter-queue-dev gcc libc6-dev; }
	@test -x /usr/lib/postgresql/15/bin/initdb || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql-15; }
	@$(PY) -c 'import netfilterqueue' 2>/dev/null || $(PY) -m pip install -q -e '.[netfaults]'
	$(PY) -u -m rigs.netfaults $(NETFAULTS_ARGS)

clocks: install ## serve and the relays under libfaketime (an hour ahead, an hour behind, drifting) under load: nothing early or late, backoff and leases unharmed, the offsets reported; the checks
	@ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends faketime; }
	@test -x /usr/lib/postgresql/15/bin/initdb || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql-15; }
	$(PY) -u -m rigs.clocks $(CLOCKS_ARGS)

mcp-conformance: install ## the official MCP conformance suite (two pinned versions, Node 22 from npm) against a stack; not-applicable list in rigs/
	@command -v npm >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm; }
	$(PY) -u -m rigs.mcp_conformance $(CONFORMANCE_ARGS)

# -- Kubernetes (deploy/kubernetes/; docs/operations.md, "On Kubernetes") ---------------------------
kube-validate: install ## render every overlay (kubectl kustomize; kubectl 1.33 fetched when none will do) and validate each object against Kubernetes 1.33-1.35, strictly
	$(PY) -m harness.kube validate

kube-rules: install ## regenerate deploy/kubernetes/optional/monitoring/prometheus-rule.yaml from deploy/observability/alerts.yml
	$(PY) -m harness.kube rules

kube: install ## the dev overlay played with podman kube play against a Postgres of its own: roles, migrate, a start and an interrupt delivered to the demo Agent
	@command -v podman >/dev/null || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			podman runc uidmap slirp4netns fuse-overlayfs containernetworking-plugins catatonit mmdebstrap; }
	@command -v mmdebstrap >/dev/null || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap; }
	@test -x /usr/lib/postgresql/15/bin/initdb || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql-15; }
	$(PY) -u -m rigs.kube $(KUBE_ARGS)

# The agent frameworks' tier (tests/frameworks/): each framework in a virtual environment of its own
# under .cache/frameworks/<name>/, from its pinned requirements (LangChain's MCP adapters pin mcp<2,
# the service runs mcp 2.x; none of them is a dependency of the service). FastMCP's client is in
# the project's test extra.
FRAMEWORKS := pydantic_ai openai_agents langchain
FRAMEWORKS_DIR := .cache/frameworks

$(FRAMEWORKS_DIR)/%/.installed: tests/frameworks/requirements/%.txt
	rm -rf $(FRAMEWORKS_DIR)/$*
	python3 -m venv $(FRAMEWORKS_DIR)/$*
	$(FRAMEWORKS_DIR)/$*/bin/python -m pip install -q -r $<
	touch $@

frameworks: install $(FRAMEWORKS:%=$(FRAMEWORKS_DIR)/%/.installed) ## the loop with PydanticAI, the OpenAI Agents SDK, LangChain+LangGraph and FastMCP's client, each with a test model
	$(PY) -m pytest tests/frameworks -m frameworks $(PYTEST_ARGS)
