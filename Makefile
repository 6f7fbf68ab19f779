# Set-up is part of every target: a fresh machine needs only python3 (>= 3.11) and network access to PyPI.
VENV ?= .venv
PY := $(VENV)/bin/python
HIL := $(VENV)/bin/hil

.PHONY: setup run test test-realtime bench docs wire-wheel clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

setup: $(VENV)/.installed

run: setup
	@mkdir -p out
	@echo "== ELLA closed loop, joint PID (reference firmware in a second process, serial pty pair, lockstep)"
	$(HIL) run ella --bus serial_frame --link pty --spawn-firmware --targets seed000_setpoints --mode lockstep \
		--duration 5 --move-time 1.0 --log out/ella_pid.msgpack
	@echo "== the same manoeuvre with the IMU vibration suppression (lockstep)"
	$(HIL) run ella --bus serial_frame --link pty --spawn-firmware --targets seed000_setpoints --mode lockstep \
		--duration 5 --move-time 1.0 --vibration-suppression --log out/ella_vs.msgpack
	@echo "== an elbow encoder signal loss mid-manoeuvre, in real time: the firmware stops, the drives' watchdog brakes"
	$(HIL) run ella --bus serial_frame --link pty --spawn-firmware \
		--duration 3 --move-time 1.0 --scenario encoder_signal_loss \
		--safe-state brake --watchdog 0.02 --log out/ella_fault.msgpack
	@echo "== reports (open them in a browser)"
	@for run in pid vs fault; do $(HIL) report out/ella_$$run.msgpack | sed 's/^/  /'; done

test: setup
	$(PY) -m pytest -q

test-realtime: setup    # the wall-clock tests (pacer, loop under a flood): on an otherwise idle machine
	$(PY) -m pytest -q -m realtime

bench: setup
	$(HIL) bench kernel

wire-wheel: setup    # the firmware's library (ella-wire: plain Python, no numpy) as a wheel in dist/
	$(PY) -m tools.wire_wheel --out dist

docs: setup     # the manual (docs/) as a site in site/; warnings are errors
	$(PY) -m tools.docs_reference
	$(PY) -m mkdocs build --strict

clean:
	rm -rf $(VENV) out site .pytest_cache
