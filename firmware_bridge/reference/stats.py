"""Moved to firmware_bridge.firmware.latency; this name imports it, for one release, with a DeprecationWarning."""
import warnings

from firmware_bridge.firmware.latency import LatencyHistogram  # noqa: F401

warnings.warn("firmware_bridge.reference.stats moved to firmware_bridge.firmware.latency", DeprecationWarning,
              stacklevel=2)
