"""Fixtures every test module may use. The shared helpers are modules beside this one: ``emulators``
(the emulator factory and the fake firmware), ``links`` (in-memory links, the answering link, waiting
for bytes on a pty), ``bus_maps`` (maps no preset ships), ``wire_values`` (random signal values)."""
from pathlib import Path

import pytest

from hil.model.config import load_model

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"


@pytest.fixture(autouse=True)
def _run_from_repo_root(monkeypatch):
    """Config paths in tests are relative to the repository root."""
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="session")
def model():
    """ELLA as configs/ella.toml describes it (read once; tests that change a model work on a copy)."""
    return load_model(CONFIGS / "ella.toml")
