# The two commands: `make demo` and `make test`. Everything else is a part of them.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install lint unit integration drills test demo bench clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

unit: install
	$(BIN)/pytest -q tests/unit

# Two workers: most integration tests wait on real processes, not on the CPU (each test has
# its own database, ports and directories; docs/operations.md, "Tests").
integration: install
	$(BIN)/pytest -q -n 2 --dist worksteal tests/integration

drills: install
	$(BIN)/etl drill ci

test: lint unit integration drills

demo: install
	$(BIN)/python -m drills.demo

bench: install
	$(BIN)/python -m bench.import_100k

clean:
	rm -rf var .pytest_cache .hypothesis
