"""The manual: its reference pages match the code, the site builds with warnings as errors (every internal
link and anchor checked, shown failing on a broken one), its pages render in headless Chromium without a
script error, and the README's links lead to pages that exist."""
from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hil.viz.browser import find_chromium, render_page
from tools import docs_reference

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def build(config_dir: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config_dir / "mkdocs.yml"),
                           "-d", str(site)], capture_output=True, text=True, timeout=300, env=ENV)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs")
    out = tmp_path_factory.mktemp("site")
    proc = build(ROOT, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_the_reference_pages_are_what_the_code_says(tmp_path, monkeypatch):
    assert docs_reference.main(["--check"]) == 0
    stale = tmp_path / "reference"
    shutil.copytree(docs_reference.OUT, stale)
    (stale / "targets.md").write_text((stale / "targets.md").read_text() + "\nmax_everything = 0\n")
    monkeypatch.setattr(docs_reference, "OUT", stale)
    assert docs_reference.main(["--check"]) == 1


def test_the_site_builds_strict_and_a_broken_link_fails_it(site, tmp_path):
    assert (site / "index.html").is_file() and (site / "reference" / "cli" / "index.html").is_file()
    broken = tmp_path / "copy"
    shutil.copytree(ROOT / "docs", broken / "docs", symlinks=True)
    shutil.copy(ROOT / "mkdocs.yml", broken / "mkdocs.yml")
    page = broken / "docs" / "faults.md"
    page.write_text(page.read_text() + "\nSee [the missing page](no-such-page.md) and [an anchor](model.md#nowhere).\n")
    proc = build(broken, tmp_path / "site")
    assert proc.returncode != 0 and "no-such-page.md" in proc.stderr


def test_the_readme_links_lead_to_pages_that_exist():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links and all((ROOT / link).exists() for link in links), [l for l in links if not (ROOT / l).exists()]
    assert len(text.splitlines()) <= 60                     # one screen


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("page, heading", [("", "ELLA HIL"), ("firmware-guide/", "The firmware author"),
                                           ("reference/bus-maps/", "Bus maps"), ("model/", "The model")])
def test_the_pages_render_in_headless_chromium(served, tmp_path, page, heading):
    if find_chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("CI: Chromium (Debian package chromium) is missing; .ci/run installs it")
        pytest.skip("no Chromium on this machine (Debian package chromium)")
    rendered = render_page(f"{served}/{page}", tmp_path / "page.png", budget_ms=4000)
    assert re.search(r"<h1[^>]*>" + re.escape(heading), rendered.dom), rendered.dom[:2000]
    assert 'class="md-nav' in rendered.dom                       # the theme's navigation was drawn
    assert not [m for m in rendered.console if "error" in m.lower()], rendered.console
