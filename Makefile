# The project's two commands. Each creates its own virtual environment from nothing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: reproduce test lab clean

reproduce: $(STAMP)  ## reproduce the PR's tables on the embedded default (synthetic full-size checkpoint, CPU)
	$(BIN)/omni-loader reproduce $(ARGS)

test: $(STAMP)  ## run the test suite
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lab: $(STAMP)  ## open the notebooks in JupyterLab
	$(BIN)/jupyter lab notebooks/

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

clean:
	rm -rf $(VENV) results
