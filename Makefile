# The project's two commands. Each creates its own virtual environment from nothing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: reproduce test lab mutation clean

reproduce: $(STAMP)  ## reproduce the PR's tables on the embedded default (synthetic full-size checkpoint, CPU)
	$(BIN)/omni-loader reproduce $(ARGS)

test: $(STAMP)  ## run the test suite
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Mutation testing of the core modules against the fast in-process unit tests ([tool.mutmut] in pyproject.toml).
# Long, so not part of `make test` or CI. Scope it with MODULES, e.g. `make mutation MODULES="stats report"`.
# Survivors are either killed by a test or listed, with the
# reason they are equivalent, in tests/mutation-equivalent.md; the score excludes the listed ones.
MODULES ?= discovery loader steps checkpoint stats report measurements report_tables rows suite integrity planner
MUTATION_JOBS ?= 2
mutant_glob = omni_loader.$(1).*

mutation: $(STAMP)  ## mutation testing of the core modules (long; not in CI): make mutation MODULES="stats report"
	@start=$$(date +%s); \
	nice -n 10 $(BIN)/mutmut run --max-children $(MUTATION_JOBS) $(foreach m,$(MODULES),'$(call mutant_glob,$(m))') \
		|| exit $$?; \
	$(BIN)/python tests/mutation_score.py --seconds $$(( $$(date +%s) - start )) $(MODULES)

# JupyterLab with the project's Jupyter configuration (jupyter-config/: no news pop-up), serving the
# repository root so that the notebooks' links into results/ resolve; it opens on notebooks/.
lab: $(STAMP)  ## open the notebooks in JupyterLab
	JUPYTER_CONFIG_PATH=$(CURDIR)/jupyter-config $(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) \
		--LabApp.default_url=/lab/tree/notebooks

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

clean:
	rm -rf $(VENV) results mutants notebooks/results
