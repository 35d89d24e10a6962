# lgcexp: one command from a fresh clone to the paper's tables.
PYTHON ?= python3
# Tests and CI read the real data from ../shared/data when it is there (never committed).
SHARED_DATA := $(abspath ../shared/data)
export LGCEXP_DATA_DIR ?= $(if $(wildcard $(SHARED_DATA)/isolet.npz),$(SHARED_DATA),$(HOME)/.cache/lgcexp/data)
JOBS ?= 2

.PHONY: install install-gpu test test-all bench reproduce-tables reproduce-tables-quick tables clean

install:            ## install lgcexp (CPU TensorFlow + faiss) with the dev tools into the current Python
	$(PYTHON) -m pip install -e '.[cpu,dev]'

install-gpu:        ## same with the CUDA builds of TensorFlow and faiss
	$(PYTHON) -m pip install -e '.[gpu,dev]'

test:               ## lint (ruff, pyproject's [tool.ruff]) then unit + end-to-end tests (full-MNIST tests are marked and left out)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m pytest -q

test-all:           ## also the full-MNIST tests
	$(PYTHON) -m pytest -q -m ""

bench:              ## speed figures -> results/bench/ (python -m benchmarks report; python -m benchmarks --list: every benchmark)
	$(PYTHON) -m benchmarks report

reproduce-tables:   ## the paper's Tables 1-2 and Figure 2 (20 seeds, parallel), figures and REPORT.md -> results/tables/
	$(PYTHON) scripts/reproduce_tables.py --jobs $(JOBS)

reproduce-tables-quick:  ## the same with 3 seeds -> results/quick/tables/
	$(PYTHON) scripts/reproduce_tables.py --quick --jobs $(JOBS)

tables:             ## rebuild results/tables/ (tables, figures, REPORT.md) from the runs under results/runs/ (without them, as in a clone: from results/runs.csv)
	lgcexp-tables $(if $(wildcard results/runs),--root results/runs --runs-csv results/runs.csv,--from-csv results/runs.csv) --out results/tables

clean:
	rm -rf outputs multirun .pytest_cache
