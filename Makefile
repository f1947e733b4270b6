# Two commands for a fresh machine with Python 3.11, a Rust toolchain and a C
# compiler (see README.md):
#   make run    install into .venv, then run the built-in default scenario
#   make test   install into .venv, then run every check and test
# Installing is idempotent: the venv is created once, and `pip install -e`
# rebuilds the Rust extension (in release) only as far as cargo finds changes;
# its PGO profile is made again only when the sources change.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# pyo3's build script looks for this interpreter; naming the same one for
# every cargo command keeps it from rebuilding pyo3 between commands.
export PYO3_PYTHON := $(abspath $(BIN)/python)

.PHONY: run test install wheel

run: install
	$(BIN)/fabricsim run -o runs/default --overwrite

test: install
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo test --workspace
	$(BIN)/ruff check .
	$(BIN)/pytest -q

# Builds the extension with profile-guided optimisation where the machine has
# the tool for it (tools/install says how; PGO=0 skips it).
install: $(BIN)/python
	BIN=$(BIN) tools/install

# The wheel a user installs, into dist/, built as `install` builds the extension.
wheel: $(BIN)/python
	BIN=$(BIN) tools/install --wheel

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
