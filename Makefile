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
	$(HIL) run configs/ella.toml --bus configs/bus/serial_frame.toml --link pty --spawn-firmware \
		--duration 6 --log out/ella_hil.msgpack

test: setup
	$(PY) -m pytest -q

bench: setup
	$(HIL) bench kernel

clean:
	rm -rf $(VENV) .numba_cache out .pytest_cache
