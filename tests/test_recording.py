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
