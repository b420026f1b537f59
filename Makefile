# The README's two commands: `make serve` and `make test`. Both create .venv and install what is missing;
# when nothing changed they only check a stamp file.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp-install
EXTRAS ?= test
PORT ?= 8080

.PHONY: install serve test lint typecheck pytest clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	$(BIN)/koe install
	touch $@

install: $(STAMP)

serve: install
	$(BIN)/koe serve --port $(PORT)

lint: install
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: install
	$(BIN)/mypy

pytest: install
	$(BIN)/pytest; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests: the suite is misconfigured"; fi; \
	exit $$status

test: lint typecheck pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
