# Two commands do everything on a fresh machine: `make sweep` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
OUT ?= ditox-report
SWEEP_ARGS ?=

.PHONY: install sweep test test-unit test-integration lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

sweep: $(STAMP)
	$(BIN)/ditox-ci sweep --out $(OUT) $(SWEEP_ARGS); code=$$?; \
	echo "report: $(OUT)/report.json  summary: $(OUT)/summary.md  (exit $$code: 0 = no new findings, 1 = new findings)"; \
	test $$code -le 1

test: $(STAMP) lint
	$(BIN)/python -m pytest -q -p no:cacheprovider tests

test-unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

test-integration: $(STAMP)
	$(BIN)/python -m pytest -q tests/integration

lint: $(STAMP)
	bash scripts/lint.sh

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .ruff_cache .mypy_cache
