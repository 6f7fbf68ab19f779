# Set-up is part of every target: a fresh machine needs only python3 (>= 3.11) and network access to PyPI.
VENV ?= .venv
PY := $(VENV)/bin/python
HIL := $(VENV)/bin/hil
export NUMBA_CACHE_DIR ?= $(CURDIR)/.numba_cache

.PHONY: setup run test bench clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

setup: $(VENV)/.installed

run: setup
	$(HIL) modes configs/ella.toml
	$(HIL) simulate configs/ella.toml --duration 5 --out out/ella_free_fall.csv
	$(HIL) simulate configs/canadarm.toml --duration 20 --out out/canadarm_trajectory.csv

test: setup
	$(PY) -m pytest -q

bench: setup
	$(HIL) bench kernel

clean:
	rm -rf $(VENV) .numba_cache out .pytest_cache
