# The project's two commands. Each creates its own virtual environment: from the lock on a Python without torch,
# or layered over the environment of a PYTHON that has one (a ROCm or CUDA machine's), replacing nothing there.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LOCK := requirements.lock
# Non-empty when $(PYTHON) already has torch: then its torch, transformers and vLLM-Omni are kept as they are
# (docs/gpu.md); OWN_ENV= (empty) installs from the lock all the same.
OWN_ENV ?= $(shell $(PYTHON) -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" \
	2>/dev/null && echo yes)
# Two stamps: `reproduce` needs only the kit and its core dependencies (a fresh clone sets up in
# about 20 s less); `test`, `lab` and `mutation` add JupyterLab (the lab extra) and the test tools.
CORE := $(VENV)/.installed-core
comma := ,
FULL := $(VENV)/.installed-full

.PHONY: reproduce test test-fast lab mutation clean lock gpu-check compat

# With bytecode writing on (see compile_imports): the first run's fork server writes what set-up left out.
reproduce: $(CORE)  ## reproduce the PR's tables on the embedded default (synthetic full-size checkpoint, CPU)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/omni-loader reproduce $(ARGS)

# The suite runs in TEST_WORKERS processes (pytest-xdist). Much of its time is spent waiting on workers,
# servers, kernels and a browser, so on two cores a third process fills those waits (from a fresh clone
# here, three kept 1.6 of the 2 cores busy: 9.7 min for .ci/run). `--dist loadscope` keeps each test file in one
# worker, so a module's shared fixture is built once; the notebooks, which two files read, are executed
# once per run under a file lock (tests/conftest.py). conftest.py orders the files longest first (from
# tests/durations.json, which `make test PYTEST_ARGS=--store-durations` rewrites), and
# --no-loadscope-reorder keeps that order (xdist's own puts the files with the most tests first).
# TEST_WORKERS=0 runs the suite in this one process.
TEST_WORKERS ?= 3
FAST_WORKERS ?= 2
XDIST = --dist loadscope --no-loadscope-reorder
test: $(FULL)  ## run the test suite
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(XDIST) -m "not compat" $(PYTEST_ARGS)

# The fast lane for development: every test in tests/ that starts no process and takes no more than a few
# seconds, chosen by markers (a guard in tests/conftest.py fails a test that starts a process without
# `subprocess`, so the lane cannot grow slow unseen). `make test` and CI run the whole suite.
test-fast: $(FULL)  ## tests that start no process (under a minute): make test-fast PYTEST_ARGS=-x
	$(BIN)/python -m pytest -q -m "not slow and not subprocess" -n $(FAST_WORKERS) $(XDIST) $(PYTEST_ARGS)

# Mutation testing of the core modules against the fast in-process unit tests ([tool.mutmut] in pyproject.toml).
# Long, so not part of `make test` or CI. Scope it with MODULES, e.g. `make mutation MODULES="reporting.stats reporting.report"`.
# Survivors are either killed by a test or listed, with the
# reason they are equivalent, in tests/mutation-equivalent.md; the score excludes the listed ones.
MODULES ?= token2wav.discovery token2wav.loader token2wav.steps token2wav.checkpoint reporting.stats reporting.report \
	reporting.measurements reporting.report_tables results.rows results.suite results.integrity results.lifecycle results.row_checks \
	reporting.controls results.planner reporting.sequential
MUTATION_JOBS ?= 2
mutant_glob = omni_loader.$(1).*

mutation: $(FULL)  ## mutation testing of the core modules (long; not in CI): make mutation MODULES="reporting.stats reporting.report"
	@start=$$(date +%s); \
	nice -n 10 $(BIN)/mutmut run --max-children $(MUTATION_JOBS) $(foreach m,$(MODULES),'$(call mutant_glob,$(m))') \
		|| exit $$?; \
	$(BIN)/python tests/mutation_score.py --seconds $$(( $$(date +%s) - start )) $(MODULES)

# Every GPU path of the kit, each step with what it must show (tests/gpu_check.py, docs/gpu.md): on a ROCm or
# CUDA machine, after `make reproduce PYTHON=/path/to/python`. GPU_CHECK_ARGS=--skip-full leaves out the full size.
gpu-check: $(CORE)  ## run every GPU path of the kit and say what each showed (needs a GPU)
	$(BIN)/python tests/gpu_check.py $(GPU_CHECK_ARGS)

# Compatibility, on demand (minutes, so not part of `make test`): the tests marked `compat` (docs/gpu.md's set-up on
# a stand-in for a ROCm machine's own Python: nothing of it replaced; the vLLM-Omni 0.28.0 and 0.30.0 wheels from the
# package index read and run as the `installed` variant), then the transformers matrix
# (tests/compat_matrix.py: each version in a scratch venv beside the lock's torch, the kit's layout counted and both
# rules run; writes docs/compat.md).
compat: $(FULL)  ## transformers matrix -> docs/compat.md, and the GPU machine's set-up on a stand-in (not in `make test`)
	$(BIN)/python -m pytest -q -m compat $(PYTEST_ARGS)
	$(BIN)/python tests/compat_matrix.py $(COMPAT_ARGS)

# JupyterLab with the project's Jupyter configuration (jupyter-config/: no news pop-up), serving the
# repository root so that the notebooks' links into results/ resolve; it opens on notebooks/.
# As root (containers, CI machines) Jupyter refuses to start without --allow-root, so it is given there.
lab: $(FULL)  ## open the notebooks in JupyterLab
	JUPYTER_CONFIG_PATH=$(CURDIR)/jupyter-config $(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) \
		--LabApp.default_url=/lab/tree/notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

# The venv is made without pip where $(PYTHON) has one (ensurepip alone takes 4 s here): that pip puts uv into the
# venv (`pip --python`), and uv installs pip into it beside the kit, for whoever uses the venv's pip later.
$(BIN)/python:
	if $(PYTHON) -m pip --version >/dev/null 2>&1; then $(PYTHON) -m venv --without-pip $(VENV); \
	else $(PYTHON) -m venv $(VENV); fi

# Installs with uv (from PyPI into the venv when absent: seconds instead of a minute), pip as the fallback.
# uv does not read pip's configuration, and pip's configuration is where this machine's pinned CPU torch
# wheel is found (find-links), so pip's find-links, indexes and constraints are handed over, and uv picks
# the best version across the indexes as pip does.
define uv_env
	pip() { if [ -x $(BIN)/pip ]; then $(BIN)/python -m pip "$$@"; else $(PYTHON) -m pip --python $(BIN)/python "$$@"; fi; }; \
	[ -x $(BIN)/uv ] || pip install --quiet uv >/dev/null 2>&1 || true; \
	cfg() { pip config list 2>/dev/null | sed -n "s/^[^.]*\.$$1='\(.*\)'$$/\1/p" | head -n 1; }; \
	fl=$$(cfg find-links); ei=$$(cfg extra-index-url); ix=$$(cfg index-url); cn=$$(cfg constraint); \
	[ -z "$$fl" ] || export UV_FIND_LINKS="$$(echo $$fl | tr ' ' ',')"; \
	[ -z "$$ei" ] || export UV_EXTRA_INDEX_URL="$$ei"; \
	[ -z "$$ix" ] || export UV_DEFAULT_INDEX="$$ix"; \
	[ -z "$$cn" ] || export UV_CONSTRAINT="$$cn"; \
	export UV_INDEX_STRATEGY=unsafe-best-match;
endef

define install
	@set -e; start=$$(date +%s); $(uv_env) \
	if [ -n "$(OWN_ENV)" ]; then $(PYTHON) -m omni_loader.cli.setup_env keep --venv $(VENV) --extras '$(2)' \
		--uv $(BIN)/uv || exit $$?; tool="uv beside $(PYTHON)'s own packages"; \
	elif [ -x $(BIN)/uv ] && $(BIN)/uv pip install --quiet --python $(BIN)/python -c $(LOCK) -e '$(1)' pip; then tool=uv; \
	else pip install --quiet -c $(LOCK) -e '$(1)' pip; tool=pip; fi; \
	echo "set-up: installed $(1) with $$tool in $$(( $$(date +%s) - start )) s"
endef

# The lock: the exact versions of the embedded default's environment (CPU torch, the kit's transformers), from
# pyproject.toml's ranges. `make lock` re-resolves keeping every pin that still fits; UPGRADE=1 takes the newest.
# A build label is dropped (torch's `+cpu`), so the lock installs wherever the version exists.
lock: | $(BIN)/python
	@set -e; $(uv_env) $(BIN)/uv pip compile pyproject.toml --extra lab --extra dev --python $(BIN)/python --quiet \
		$(if $(UPGRADE),--upgrade,-c $(LOCK)) --no-annotate --custom-compile-command "make lock" -o $(LOCK).new
	sed 's/^\(torch==[^+]*\)+.*/\1/' $(LOCK).new > $(LOCK) && rm $(LOCK).new

# Bytecode for what a run imports, written at set-up. uv installs without it (pip compiles every file, for a minute
# more), and a shell with PYTHONDONTWRITEBYTECODE set (this machine's) never writes any, so every process compiled
# torch and transformers from source again: seconds in each CLI, fork server, worker and kernel. Importing modules
# once with writing on compiles exactly the ones the kit's processes use, into the venv and the clone's __pycache__,
# in two processes at once on two cores. The core set-up (`make reproduce`) compiles what the CLI imports before its
# fork server starts (torch) and what it imports after the runs (the report's pandas, scipy and matplotlib); the
# fork server's own imports (transformers' Qwen2.5-Omni code, 5 s more) are compiled by the first run's fork server
# itself, on the other core while the synthetic snapshot is written, because `reproduce` runs with writing on. The
# full set-up (`make test`) compiles the fork server's PRELOAD and the tests' imports too: tests start many at once.
FIRST_IMPORTS := 'torch', 'safetensors.torch'
PRELOAD := __import__('omni_loader.bench.worker', fromlist=['PRELOAD']).PRELOAD
RUN_IMPORTS := 'pandas', 'scipy.stats', 'matplotlib.pyplot', 'omni_loader.cli', 'omni_loader.reporting.report'
TEST_IMPORTS := 'pytest', 'xdist', 'papermill', 'nbclient', 'ipykernel.kernelapp', 'playwright.sync_api', 'psutil'
importing = env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -c "import importlib, importlib.util; \
	[importlib.import_module(m) for m in ($(1)) if importlib.util.find_spec(m.split('.')[0])]"
define compile_imports
	@start=$$(date +%s); \
	$(call importing,$(1)) & first=$$!; \
	$(call importing,$(2)) || exit $$?; wait $$first || exit $$?; \
	echo "set-up: bytecode of what a run imports written in $$(( $$(date +%s) - start )) s"
endef

$(CORE): pyproject.toml $(LOCK) | $(BIN)/python
	$(call install,.,)
	$(call compile_imports,$(FIRST_IMPORTS),$(RUN_IMPORTS))
	touch $(CORE)

$(FULL): pyproject.toml $(LOCK) | $(BIN)/python
	$(call install,.[lab$(comma)dev],lab$(comma)dev)
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	$(call compile_imports,$(PRELOAD),$(RUN_IMPORTS)$(comma) $(TEST_IMPORTS))
	touch $(FULL) $(CORE)

clean:
	rm -rf $(VENV) results mutants notebooks/results
