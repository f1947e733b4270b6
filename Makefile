# Two commands for a fresh machine with Python 3.11, a Rust toolchain and a C
# compiler (see README.md):
#   make run    install into .venv, then run the built-in default scenario
#   make test   install into .venv, then run every check and test
# Installing is idempotent: the venv is created once, and `pip install -e`
# rebuilds the Rust extension (in release) only as far as cargo finds changes.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# pyo3's build script looks for this interpreter; naming the same one for
# every cargo command keeps it from rebuilding pyo3 between commands.
export PYO3_PYTHON := $(abspath $(BIN)/python)

.PHONY: run test install

run: install
	$(BIN)/fabricsim run -o runs/default --overwrite

test: install
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo test --workspace
	$(BIN)/ruff check .
	$(BIN)/pytest -q

install: $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,ray]'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
