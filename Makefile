# lgcexp: one command from a fresh clone to the paper's tables.
PYTHON ?= python3
# Tests and CI read the real data from ../shared/data when it is there (never committed).
SHARED_DATA := $(abspath ../shared/data)
export LGCEXP_DATA_DIR ?= $(if $(wildcard $(SHARED_DATA)/isolet.npz),$(SHARED_DATA),$(HOME)/.cache/lgcexp/data)
JOBS ?= 2

.PHONY: install install-gpu test test-all bench reproduce-tables reproduce-tables-quick tables \
	reproduce-lowlabel reproduce-lowlabel-quick tables-lowlabel reproduce-detection reproduce-detection-quick tables-detection clean

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

reproduce-tables:   ## the paper's Tables 1-2 and Figure 2 (20 seeds, parallel), the pairwise table and the rerun baselines, figures and REPORT.md -> results/tables/
	$(PYTHON) scripts/reproduce_tables.py --jobs $(JOBS)

reproduce-tables-quick:  ## the same with 3 seeds -> results/quick/tables/
	$(PYTHON) scripts/reproduce_tables.py --quick --jobs $(JOBS)

tables:             ## rebuild results/tables/ (tables, figures, REPORT.md) from the runs under results/runs/ (without them, as in a clone: from results/runs.csv)
	lgcexp-tables $(if $(wildcard results/runs),--root results/runs --runs-csv results/runs.csv,--from-csv results/runs.csv) --out results/tables

reproduce-lowlabel:  ## every low-label experiment (conf/experiment/lowlabel_*.yaml; hours) -> results/lowlabel/, docs/poisson.md's tables
	$(PYTHON) scripts/reproduce_lowlabel.py --jobs $(JOBS)

reproduce-lowlabel-quick:  ## the low-label experiments that run in minutes (digits size, raw MNIST) -> the same places
	$(PYTHON) scripts/reproduce_lowlabel.py --quick --jobs $(JOBS)

tables-lowlabel:    ## rebuild results/lowlabel/tables/ and docs/poisson.md's generated tables from the committed results/lowlabel/runs.csv
	lgcexp-tables --lowlabel --from-csv results/lowlabel/runs.csv --out results/lowlabel/tables --docs docs/poisson.md

reproduce-detection:  ## the detector tables of docs/label_issues.md, every run redone (hours) -> results/label_issues/, the docs' blocks
	$(PYTHON) scripts/reproduce_detection.py

reproduce-detection-quick:  ## the same for the digits parts only (~35 min on 2 shared cores); the other rows stay as committed
	$(PYTHON) scripts/reproduce_detection.py --quick

tables-detection:   ## rebuild the detector tables and docs/label_issues.md's generated blocks from the committed rows in results/label_issues/
	$(PYTHON) scripts/reproduce_detection.py --tables-only

clean:
	rm -rf outputs multirun .pytest_cache
