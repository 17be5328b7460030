# The two commands a newcomer needs: `make run` and `make test`.
# Both create or update .venv themselves.

PYTHON ?= python3
VENV := .venv
ifeq ($(OS),Windows_NT)
BIN := $(VENV)/Scripts
else
BIN := $(VENV)/bin
endif
# Two stamps, each newer than pyproject.toml once its install is done:
# RUN_STAMP, mcp-tray and what running it needs (`make run`);
# DEV_STAMP, the dev extras too (`make test`). Installing the dev extras
# installs the runtime as well, so it renews both: `make run` after
# `make test` installs nothing, `make test` after `make run` adds the extras.
RUN_STAMP := $(VENV)/.stamp-run
DEV_STAMP := $(VENV)/.stamp-dev
DEMO := resources/demo/config.json

.PHONY: run test lint bench conformance bundle clean

# The venv, made once (and pip brought up to date then).
define make_venv
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "mcp-tray needs Python 3.11 or newer; set PYTHON=python3.11")'
	@test -x $(BIN)/python || { $(PYTHON) -m venv $(VENV) && $(BIN)/python -m pip install --quiet --upgrade pip; }
endef

$(RUN_STAMP): pyproject.toml
	$(make_venv)
	$(BIN)/python -m pip install --quiet -e .
	@touch $(RUN_STAMP)

$(DEV_STAMP): pyproject.toml
	$(make_venv)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(DEV_STAMP) $(RUN_STAMP)

# The tray on the bundled demo servers. Whether this OS can show its window
# is mcp-tray's one decision (core/platform/display.py): without a display it
# says so and runs headless (Ctrl+C stops it).
run: $(RUN_STAMP)
	$(BIN)/mcp-tray run --config $(DEMO)

# mypy three times: as this OS, then as macOS and as Windows would see the
# code (typeshed gates each OS's calls; core/platform/ holds all of them).
LINT := $(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy \
	&& $(BIN)/mypy --platform darwin --cache-dir .mypy_cache/darwin \
	&& $(BIN)/mypy --platform win32 --cache-dir .mypy_cache/win32 \
	&& $(BIN)/lint-imports
lint: $(DEV_STAMP)
	$(LINT)

# The linters run beside the tests, their output held until the tests end: the
# tests leave a fifth of two cores idle (children starting, bounded waits), which
# the linters' half minute of work fills. Either failing fails `make test`.
test: $(DEV_STAMP)
	@log=$$(mktemp); \
	( $(LINT) ) >$$log 2>&1 & linting=$$!; \
	QT_QPA_PLATFORM=offscreen $(BIN)/pytest -n auto; tests=$$?; \
	wait $$linting; lint=$$?; \
	echo "--- lint (ruff, mypy as this OS, macOS and Windows, import contracts)"; \
	cat $$log; rm -f $$log; \
	if [ $$lint -ne 0 ]; then echo "make test: lint failed"; fi; \
	[ $$tests -eq 0 ] && [ $$lint -eq 0 ]

bench: $(DEV_STAMP)
	$(BIN)/python bench/recovery.py
	$(BIN)/python bench/registry.py

# The official MCP conformance suite's server scenarios, direct vs through the
# gateway (bench/conformance.py). Not part of `test`: it downloads the suite
# and Node 22 from npm into .conformance/ on first use.
conformance: $(DEV_STAMP)
	$(BIN)/python bench/conformance.py

# The desktop bundle of this OS (PyInstaller; packaging/bundle.py says what each
# gets), then its smoke test through the command-line launcher. Not part of
# `test`: it downloads PyInstaller and takes a minute or two.
ifeq ($(OS),Windows_NT)
BUNDLE_LAUNCHER := dist/mcp-tray/mcp-tray-cli.exe
else ifeq ($(shell uname -s),Darwin)
BUNDLE_LAUNCHER := dist/mcp-tray.app/Contents/MacOS/mcp-tray
else
BUNDLE_LAUNCHER := dist/mcp-tray/mcp-tray
endif
bundle: $(RUN_STAMP)
	$(BIN)/python -m pip install -q -e '.[bundle]'
	$(BIN)/pyinstaller --noconfirm --distpath dist --workpath build packaging/mcp-tray.spec
	sh packaging/smoke_test.sh $(BUNDLE_LAUNCHER) $(DEMO)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
