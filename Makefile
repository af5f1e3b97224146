# Task runner. `make run` sets up and evaluates the FiQA example; `make test` runs the linters, then the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATASET ?= examples/fiqa/samples.jsonl
# More options of `rag-eval run`, e.g. make run DATASET=mine.jsonl ARGS='--max-rejected-share 0.2'.
ARGS ?=

.PHONY: setup setup-dev run lint lint-fast typecheck test dev lock clean

# $(call install,EXTRAS): the environment with the project and EXTRAS (e.g. [dev]), at the versions of
# requirements.lock (`make lock` writes it). The project's own bytecode is compiled once: where
# PYTHONDONTWRITEBYTECODE is set (containers often do), every command would compile its ~100 modules again.
define install
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.$(1)'
	$(BIN)/python -m compileall -q metrics assets orchestration
endef

# What running needs, no extra (about 830 MB).
$(BIN)/rag-eval: pyproject.toml requirements.lock
	$(call install,)
	touch $@

# Every extra the tests exercise, the docs, the test runner and the linters (`.[dev]`, about 1.8 GB in all),
# in one install (it holds what running needs too).
$(VENV)/.dev: pyproject.toml requirements.lock
	$(call install,[dev])
	touch $(BIN)/rag-eval $@

# The Dagster UI (the `ui` extra) for make dev.
$(VENV)/.ui: $(BIN)/rag-eval
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[ui]'
	touch $@

setup: $(BIN)/rag-eval

setup-dev: $(VENV)/.dev

run: setup
	$(BIN)/rag-eval run $(DATASET) $(ARGS)

# The fast checks (lint-fast, about 8 s), then mypy (typecheck).
lint: lint-fast typecheck

# ruff, import cycles and wrong-way imports (tools/import_cycles.py), the docs build.
lint-fast: setup-dev
	$(BIN)/ruff check .
	$(BIN)/python tools/import_cycles.py
	@# The documentation site (mkdocs.yml): broken links, a metric docstring or the CLI reference that fails to render.
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir build/site

# mypy (pyproject.toml [tool.mypy]): from a fresh clone (no .mypy_cache) about 85 s on one core, most of it
# reading the types of Dagster, pandas and pydantic; 2 s with its cache.
typecheck: setup-dev
	mkdir -p .mypy_src/rag_eval && for p in metrics assets orchestration; do ln -sfn ../../$$p .mypy_src/rag_eval/$$p; done
	$(BIN)/mypy

# Three workers (pytest-xdist) on two cores: the slowest tests mostly wait (the deployment test's processes use a
# quarter of a core over its 6 minutes, waiting on the daemon's ticks and its runs' start-up), and the suite passes
# at a load of 9 on two cores. A test file per worker at a time: its module fixtures (a daemon, a server) built once;
# the longest files first (tests/conftest.py: LONGEST_FIRST, in collection order, not xdist's most-tests-first);
# the 25 slowest tests listed at the end (what to make faster next).
PYTEST_ARGS ?= -n 3 --dist loadfile --no-loadscope-reorder --durations=25
# The fast checks first, then the tests with the network off where namespaces allow it, so an accidental download
# fails them: as root a network namespace alone, else in a user namespace (tests/postgres.py starts PostgreSQL as
# `nobody` in either). mypy runs beside the tests (one process among the dozen they keep busy, not 85 s alone before
# them): its output (build/typecheck.log) is printed after theirs, and `make test` fails when it fails.
# The tests' temporary files (pytest's tmp_path, Dagster's test instances, the TMPDIR of the commands they start)
# in memory, in a folder of /dev/shm removed after them, where it has TEST_SHM_KB free (two workers' run of the
# slow tests left 300 MB in theirs): on disk a FiQA run of rag-eval waits about 6 s on the 1,846 fdatasync of its
# SQLite files (test_gate_pipeline.py alone: 292 s on disk, 234 s in memory, side by side on the same machine).
TEST_SHM_KB ?= 2000000
test: lint-fast
	@mkdir -p build; $(MAKE) --no-print-directory typecheck >build/typecheck.log 2>&1 & typecheck=$$!; \
	tmp=; if [ "$$(df --output=avail -k /dev/shm 2>/dev/null | tail -n 1)" -ge $(TEST_SHM_KB) ] 2>/dev/null; then \
		tmp=$$(mktemp -d /dev/shm/rag-eval-tests.XXXXXX) && export TMPDIR=$$tmp && echo "temporary files in $$tmp"; \
	fi; \
	if unshare -n true 2>/dev/null; then \
		echo "running the tests with the network off (unshare -n, loopback only)"; \
		unshare -n sh -c 'ip link set lo up 2>/dev/null; exec $(BIN)/python -m pytest $(PYTEST_ARGS)'; \
	elif unshare -rn true 2>/dev/null; then \
		echo "running the tests with the network off (unshare -rn, loopback only)"; \
		unshare -rn sh -c 'ip link set lo up 2>/dev/null; exec $(BIN)/python -m pytest $(PYTEST_ARGS)'; \
	else \
		$(BIN)/python -m pytest $(PYTEST_ARGS); \
	fi; tests=$$?; \
	[ -z "$$tmp" ] || rm -rf "$$tmp"; \
	wait $$typecheck; typed=$$?; cat build/typecheck.log; \
	[ $$typed -eq 0 ] || echo "make test: mypy failed (above)"; [ $$tests -eq 0 ] && [ $$typed -eq 0 ]

# The UI on :3000, and great-expectations' Data Docs (out/data_docs/) on :3001 for the UI's links to them.
# dagster dev runs in a session of its own: one Ctrl-C asks it to stop, and after 5 s (left alone its webserver
# and code servers can take minutes) what it started is killed; a run it launched is marked failed by the next one.
dev: $(VENV)/.ui
	mkdir -p out/data_docs
	$(BIN)/python -m http.server 3001 --bind 127.0.0.1 --directory out/data_docs >/dev/null 2>&1 & docs=$$!; \
	RAG_EVAL_DATA_DOCS_URL=http://127.0.0.1:3001 DAGSTER_HOME=$(CURDIR)/dagster_home \
	setsid $(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000 & dev=$$!; \
	stop() { kill -INT -$$dev 2>/dev/null; for i in $$(seq 10); do kill -0 -$$dev 2>/dev/null || break; sleep 0.5; done; \
		kill -KILL -$$dev 2>/dev/null; kill $$docs 2>/dev/null; echo "make dev: stopped"; }; \
	trap 'stop; exit 130' INT TERM; wait $$dev; status=$$?; kill $$docs 2>/dev/null; exit $$status

# After a change of pyproject.toml's dependencies: pins every package of every extra again (versions kept
# where they still fit; `rm requirements.lock` first to take the newest ones).
lock: setup-dev
	$(BIN)/python -m pip install --quiet uv==0.13.9
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 --universal -o requirements.lock

clean:
	rm -rf out datasets .rag_eval_cache; find dagster_home -mindepth 1 ! -name dagster.yaml -delete
