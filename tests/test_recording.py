"""Bus traffic recorded with python-can's writers reads back with python-can's readers."""
import can
import pytest

from firmware_bridge.links.base import Frame
from firmware_bridge.links.recording import BusRecorder


@pytest.mark.parametrize("suffix", [".asc", ".blf"])
def test_recorded_frames_read_back(tmp_path, suffix):
    path = str(tmp_path / f"bus{suffix}")
    rec = BusRecorder(path)
    sent = [Frame(0x100 + i, bytes([i, 2 * i % 256]), timestamp=1.0 + i * 1e-3) for i in range(50)]
    for i, f in enumerate(sent):
        rec.put(f, received=bool(i % 2))
    rec.close()
    got = list(can.LogReader(path))
    assert rec.written == 50 and rec.dropped == 0
    assert [m.arbitration_id for m in got] == [f.arbitration_id for f in sent]
    assert [bytes(m.data) for m in got] == [f.data for f in sent]
    assert [m.is_rx for m in got] == [bool(i % 2) for i in range(50)]


def test_an_asc_recording_is_dated_today_and_keeps_the_frames_spacing(tmp_path):
    """Frames are stamped on the monotonic clock; the file carries wall-clock time (not 1970)."""
    import time
    from datetime import datetime
    path = str(tmp_path / "bus.asc")
    rec = BusRecorder(path)
    now = time.monotonic()
    for i in range(3):
        rec.put(Frame(0x100, bytes([i]), timestamp=now + i * 1e-3), received=True)
    rec.close()
    date_line = next(line for line in open(path, encoding="ascii") if line.startswith("date "))
    assert str(datetime.now().year) in date_line and "1970" not in date_line
    stamps = [m.timestamp for m in can.LogReader(path)]
    assert stamps[1] - stamps[0] == pytest.approx(1e-3, abs=1e-6)
