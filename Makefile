# Two commands for a fresh machine: `make run` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG ?= examples/netmon.yaml

.PHONY: setup system-deps system-packages run test test-setup helm lint bench clean connect-server

# uv (from PyPI) installs the project in the venv: 44 s on a fresh 2-core machine, against 89 s
# for pip (measured side by side without caches at 47cf05e)
$(BIN)/freshet: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[test]'
	@touch $@

setup: $(BIN)/freshet

run: setup
	$(BIN)/freshet run --config $(CONFIG) --demo

# promtool/prometheus, systemd-analyze, Java 17, Chromium: installed when missing and possible, else
# one line naming the apt-get command (scripts/system_deps.sh); helm: built once (scripts/fetch_helm.sh)
system-deps: system-packages helm

system-packages:
	@PY=$(PY) bash scripts/system_deps.sh --no-helm

helm:
	@bash scripts/fetch_helm.sh

# The packages first (the venv needs python3-venv), then helm's build (CPU) beside the venv and
# the jars (mostly network): on a fresh machine helm alone takes about 2 minutes.
# Python keeps the bytecode of what it imports, even where the machine sets PYTHONDONTWRITEBYTECODE
# (as this workplace's machines do): else every daemon, script and CLI a test starts compiles PySpark, FastAPI,
# pydantic … from source again (importing the daemon's modules took 2.5-2.7 s, 0.9-1.0 s from bytecode).
test: export PYTHONDONTWRITEBYTECODE =
test: system-packages
	@$(MAKE) --no-print-directory -j2 helm test-setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=25

# the jars, then the tests' class-data archive for Spark's JVMs (tests/helpers_cds.py), made here
# beside helm's build rather than by the first Spark test while the other pytest worker waits
test-setup: setup
	$(BIN)/python scripts/fetch_jars.py
	$(BIN)/python scripts/fetch_jars.py --s3a
	$(BIN)/python -m tests.helpers_cds

# A Spark Connect server with Delta on this machine, for `spark: {remote: "sc://127.0.0.1:15002"}`
# (ops/README.md). Foreground; Ctrl-C stops it. CONNECT_ARGS="--port 15003 --master local[2]" etc.
connect-server: setup
	$(BIN)/python scripts/fetch_jars.py
	$(BIN)/python scripts/connect_server.py $(CONNECT_ARGS)

bench: setup
	$(BIN)/python scripts/bench_scheduler.py
	$(BIN)/python scripts/bench_sim.py
	$(BIN)/python scripts/bench_intake.py
	$(BIN)/python scripts/bench_delta.py

clean:
	rm -rf $(VENV) data landing out
