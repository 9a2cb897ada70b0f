# The project's two commands. Each creates its own virtual environment from nothing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stamps: `reproduce` needs only the kit and its core dependencies (a fresh clone sets up in
# about 20 s less); `test`, `lab` and `mutation` add JupyterLab (the lab extra) and the test tools.
CORE := $(VENV)/.installed-core
FULL := $(VENV)/.installed-full

.PHONY: reproduce test lab mutation clean

reproduce: $(CORE)  ## reproduce the PR's tables on the embedded default (synthetic full-size checkpoint, CPU)
	$(BIN)/omni-loader reproduce $(ARGS)

test: $(FULL)  ## run the test suite
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Mutation testing of the core modules against the fast in-process unit tests ([tool.mutmut] in pyproject.toml).
# Long, so not part of `make test` or CI. Scope it with MODULES, e.g. `make mutation MODULES="stats report"`.
# Survivors are either killed by a test or listed, with the
# reason they are equivalent, in tests/mutation-equivalent.md; the score excludes the listed ones.
MODULES ?= discovery loader steps checkpoint stats report measurements report_tables rows suite integrity planner
MUTATION_JOBS ?= 2
mutant_glob = omni_loader.$(1).*

mutation: $(FULL)  ## mutation testing of the core modules (long; not in CI): make mutation MODULES="stats report"
	@start=$$(date +%s); \
	nice -n 10 $(BIN)/mutmut run --max-children $(MUTATION_JOBS) $(foreach m,$(MODULES),'$(call mutant_glob,$(m))') \
		|| exit $$?; \
	$(BIN)/python tests/mutation_score.py --seconds $$(( $$(date +%s) - start )) $(MODULES)

# JupyterLab with the project's Jupyter configuration (jupyter-config/: no news pop-up), serving the
# repository root so that the notebooks' links into results/ resolve; it opens on notebooks/.
lab: $(FULL)  ## open the notebooks in JupyterLab
	JUPYTER_CONFIG_PATH=$(CURDIR)/jupyter-config $(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) \
		--LabApp.default_url=/lab/tree/notebooks

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(CORE): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(CORE)

$(FULL): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[lab,dev]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(FULL) $(CORE)

clean:
	rm -rf $(VENV) results mutants notebooks/results
