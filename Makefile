# corral — two commands on a fresh machine: `make demo` and `make test`.
# Both install exactly the versions in requirements.lock (every dependency, direct and transitive, with
# hashes); `make lock` refreshes the lock on purpose. Only Python 3.11+ and pip are needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LINTED := src tests benchmarks
# The one resolution the lock holds: every extra, every platform, Python 3.11 and later.
COMPILE = $(BIN)/uv pip compile pyproject.toml --extra test --extra dev --universal --python-version 3.11 \
          --generate-hashes --custom-compile-command "make lock" --quiet

.PHONY: demo test check lint types check-lock lock venv bench clean

$(STAMP): pyproject.toml requirements.lock
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --require-hashes --no-deps -r requirements.lock
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/corral simulate

test: check
	$(BIN)/python -m pytest -n 2 tests

check: lint types check-lock
	$(BIN)/pip check

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

types: $(STAMP)
	$(BIN)/mypy

# Fails when requirements.lock no longer matches pyproject.toml: the resolution is redone starting from
# the locked versions (uv keeps every pin that still satisfies pyproject.toml) and must come out the same.
check-lock: $(STAMP)
	@tmp=$$(mktemp -d) && cp requirements.lock $$tmp/lock && $(COMPILE) -o $$tmp/lock \
	  && if diff -q requirements.lock $$tmp/lock >/dev/null; then echo "requirements.lock is up to date"; \
	     else diff -u requirements.lock $$tmp/lock | head -40; rm -rf $$tmp; \
	          echo "requirements.lock is out of date with pyproject.toml: run 'make lock' and commit it"; exit 1; fi; \
	  rm -rf $$tmp

# Resolve again from pyproject.toml, keeping every locked version that still satisfies it;
# `make lock UPGRADE=1` takes the newest releases it allows instead. Review the diff, run `make test`,
# and commit requirements.lock.
lock: $(STAMP)
	$(COMPILE) $(if $(UPGRADE),--upgrade) -o requirements.lock

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) corral-report .pytest_cache .mypy_cache .ruff_cache
