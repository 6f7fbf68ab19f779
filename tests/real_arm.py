"""A synthetic "real arm" for the identification and fitting tests: ELLA with its links 10 % softer
(E_Pa x 0.9) and twice as damped (damping_ratio x 2) as the preset says, recorded through the
emulator's own sensors (noise, bias, filter, quantisation) in lockstep with the reference
firmware: a set-point move, an elbow encoder signal loss at 0.7 s, and the watchdog's brake stop
after which the links ring out with the joints locked (the firmware then falls silent: lockstep
steps on after 0.3 s instead of the default 10 s)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
E_SCALE, DAMPING_SCALE = 0.9, 2.0
E_PA, DAMPING_RATIO = 2.1e11, 0.01          # the preset's, for both links


def hidden_preset(folder: Path) -> Path:
    text = (ROOT / "configs/ella.toml").read_text()
    stiffness = "E_Pa = 2.1e11"
    assert float(stiffness.split("= ")[1]) == E_PA and text.count(stiffness) == 2
    assert text.count(f"damping_ratio = {DAMPING_RATIO}\n") == 2
    path = folder / "hidden_ella.toml"
    path.write_text(text.replace(stiffness, f"E_Pa = {E_PA * E_SCALE:.6e}")
                    .replace(f"damping_ratio = {DAMPING_RATIO}\n", f"damping_ratio = {DAMPING_RATIO * DAMPING_SCALE}\n"))
    return path


def brake_stop(preset: Path, log: Path, move_time_s: float = 1.0, duration_s: float = 2.5) -> Path:
    proc = subprocess.run([sys.executable, "-m", "hil", "run", str(preset), "--bus", "serial_frame",
                           "--spawn-firmware", "--mode", "lockstep", "--duration", str(duration_s), "--move-time",
                           str(move_time_s), "--scenario", "encoder_signal_loss", "--safe-state", "brake",
                           "--watchdog", "0.02", "--lockstep-timeout", "0.3", "--log", str(log), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return log


PAYLOAD_KG, PAYLOAD_SCALE = 2.1, 1.3            # the preset's payload, and the heavier one of the loaded arm
FRICTION_SCALE = 1.3                            # the loaded arm's joints: viscous and Coulomb friction
FRICTION = {"yaw_carrier": (1.0, 1.0), "link1": (1.0, 1.0), "link2": (0.5, 0.5)}   # the preset's (N m s/rad, N m)
KT_N_M_A, KT_SCALE = 0.06, 1.1                  # every motor's torque constant: the preset's, the loaded arm's factor
GYRO = ("bias_rad_s = [1.5e-3, -1.0e-3, 0.8e-3]\n",   # the preset's gyro bias, and the loaded arm's z bias and
        "bias_rad_s = [1.5e-3, -1.0e-3, 1.8e-3]\n  scale_error = [0.0, 0.0, 0.02]\n")    # z scale error
GYRO_BIAS_Z, GYRO_SCALE_ERROR_Z = 1.8e-3, 0.02


def sensors_and_motors_as_preset(text: str) -> str:
    """The loaded arm's preset with the preset's torque constants and gyro (its payload and friction kept)."""
    return text.replace(f"torque_constant_N_m_A = {KT_N_M_A * KT_SCALE:.6g}\n",
                        f"torque_constant_N_m_A = {KT_N_M_A}\n").replace(GYRO[1], GYRO[0])


def loaded_preset(folder: Path) -> Path:
    """ELLA carrying a payload 30 % heavier than the preset says, its joints' friction 30 % more, motors
    whose torque constant is 10 % above the preset's (the drives convert with it: the torques are the
    commanded ones, the currents 10 % lower) and a gyro whose z axis has another bias and a 2 % scale
    error."""
    text = (ROOT / "configs/ella.toml").read_text()
    assert text.count(f"torque_constant_N_m_A = {KT_N_M_A}\n") == 3 and text.count(GYRO[0]) == 1
    text = text.replace(f"torque_constant_N_m_A = {KT_N_M_A}\n", f"torque_constant_N_m_A = {KT_N_M_A * KT_SCALE:.6g}\n")
    text = text.replace(GYRO[0], GYRO[1])
    payload = f'name = "payload"\n  station_m = 0.93\n  mass_kg = {PAYLOAD_KG}'
    assert text.count(payload) == 1
    text = text.replace(payload, payload.replace(str(PAYLOAD_KG), f"{PAYLOAD_KG * PAYLOAD_SCALE:.6g}"))
    for body, (viscous, coulomb) in FRICTION.items():
        head, tail = text.split(f'name = "{body}"\n', 1)
        old = f"viscous_N_m_s_rad = {viscous}\n  coulomb_N_m = {coulomb}\n"
        end = tail.find("[[body]]")
        assert tail.index(old) < (end if end >= 0 else len(tail))        # this body's joint
        tail = tail.replace(old, f"viscous_N_m_s_rad = {viscous * FRICTION_SCALE:.6g}\n  "
                                 f"coulomb_N_m = {coulomb * FRICTION_SCALE:.6g}\n", 1)
        text = f'{head}name = "{body}"\n{tail}'
    path = folder / "loaded_ella.toml"
    path.write_text(text)
    return path


def move(preset: Path, log: Path, move_time_s: float, duration_s: float = 2.0) -> Path:
    """A set-point move under the reference firmware's PID, in lockstep."""
    proc = subprocess.run([sys.executable, "-m", "hil", "run", str(preset), "--bus", "serial_frame",
                           "--spawn-firmware", "--mode", "lockstep", "--duration", str(duration_s), "--move-time",
                           str(move_time_s), "--log", str(log), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return log
