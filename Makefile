# Task runner. `make run` sets up and evaluates the FiQA example; `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATASET ?= examples/fiqa/samples.jsonl
# More options of `rag-eval run`, e.g. make run DATASET=mine.jsonl ARGS='--max-rejected-share 0.2'.
ARGS ?=

.PHONY: setup run test dev clean

$(BIN)/rag-eval: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,traces]'
	@# The project's own bytecode, once: where PYTHONDONTWRITEBYTECODE is set (containers often do), every
	@# command would compile its ~100 modules again (~0.1 s of CPU); an edited module is compiled again as usual.
	$(BIN)/python -m compileall -q metrics assets orchestration
	touch $@

setup: $(BIN)/rag-eval

run: setup
	$(BIN)/rag-eval run $(DATASET) $(ARGS)

# With the network off where user namespaces allow it, so an accidental download fails the tests.
test: setup
	@if unshare -rn true 2>/dev/null; then \
		echo "running the tests with the network off (unshare -rn, loopback only)"; \
		unshare -rn sh -c 'ip link set lo up 2>/dev/null; exec $(BIN)/python -m pytest'; \
	else \
		$(BIN)/python -m pytest; \
	fi

dev: setup
	DAGSTER_HOME=$(CURDIR)/dagster_home $(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

clean:
	rm -rf out datasets .rag_eval_cache; find dagster_home -mindepth 1 ! -name dagster.yaml -delete
