from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"


@pytest.fixture(autouse=True)
def _run_from_repo_root(monkeypatch):
    """Config paths in tests are relative to the repository root."""
    monkeypatch.chdir(ROOT)
