# Two commands do everything on a fresh machine: `make sweep` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
OUT ?= ditox-report
MODELS ?= onnx-node onnx-data exported packaged
SWEEP_ARGS ?=
MODELS_STAMP := $(VENV)/.models-$(shell cksum < ditox_ci/data/packaged-models.yml | cut -d' ' -f1)

.PHONY: install models exported-models browser sweep bisect bisect-history test test-unit test-integration image-test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

# The packaged trained models, without their packages' own dependencies (see pyproject's `models`).
$(MODELS_STAMP): $(STAMP) ditox_ci/data/packaged-models.yml
	$(BIN)/python -m ditox_ci.corpus.packaged > $(VENV)/models-requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -r $(VENV)/models-requirements.txt
	rm -f $(VENV)/.models-*
	touch $@

models: $(MODELS_STAMP)

# Makes ditox_ci/data/exported/ again (committed; only to change or re-pin it): torch, transformers,
# scikit-learn and skl2onnx in a virtual environment of their own, not ditox-ci's
EXPORT_VENV ?= .venv-export
exported-models:
	test -x $(EXPORT_VENV)/bin/python || $(PYTHON) -m venv $(EXPORT_VENV)
	$(EXPORT_VENV)/bin/python -m pip install --quiet -r scripts/exported-models/requirements.txt
	PYTHONHASHSEED=0 $(EXPORT_VENV)/bin/python scripts/exported-models/export.py

sweep: $(MODELS_STAMP)
	$(BIN)/ditox-ci sweep --models $(MODELS) --out $(OUT) $(SWEEP_ARGS); code=$$?; \
	echo "report: $(OUT)/report.json  summary: $(OUT)/summary.md  (exit $$code: 0 = no new findings, 1 = new findings)"; \
	test $$code -le 1

# Since when (docs/bisect.md): each new bug of `make sweep`'s report tried on onnxoptimizer's
# releases (wheels from PyPI, nothing built); the results go into $(OUT)/report.json
bisect: $(STAMP)
	$(BIN)/ditox-ci bisect --report $(OUT)

# The same bugs over onnx/optimizer's own history since 0.4.2 (each commit built from source, so
# OPTIMIZER_CHECKOUT must be a clone with its submodules): names the commits that fixed them
OPTIMIZER_CHECKOUT ?=
bisect-history: $(STAMP)
	@test -f "$(OPTIMIZER_CHECKOUT)/third_party/onnx/CMakeLists.txt" || { \
	  echo "set OPTIMIZER_CHECKOUT to a clone of onnx/optimizer with its submodules (git clone --recursive)"; exit 2; }
	OPTIMIZER_CHECKOUT=$(abspath $(OPTIMIZER_CHECKOUT)) $(BIN)/python -m pytest -q -p no:cacheprovider \
	  tests/integration/triage/test_bisect_history.py

# Debian's Chromium, in which a test opens the history page headless (tests/integration/cli/test_history.py)
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || { \
	  echo "make test needs Chromium for the history page's test: apt-get install chromium (as root)"; exit 2; }

test: $(MODELS_STAMP) lint browser
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit tests/integration

# The Action as GitHub runs it: the image built from the Dockerfile (podman; a Debian stand-in for
# the base where no registry answers), the example workflows replayed job by job in it
image-test: $(STAMP)
	bash scripts/image-build.sh $(VENV)/image.env
	set -a && . ./$(VENV)/image.env && set +a && \
	$(BIN)/python -m pytest -q -p no:cacheprovider --basetemp=$$DITOX_IMAGE_DIR/runs tests/image

test-unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

test-integration: $(STAMP) browser
	$(BIN)/python -m pytest -q tests/integration

lint: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bash scripts/lint.sh

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .ruff_cache .mypy_cache
