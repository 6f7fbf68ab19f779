"""Headless Chromium: render a page, its DOM after the scripts ran, the console, a screenshot.

Used by the report's browser test and by ``hil report --screenshot`` (the manual's picture, docs/report.png). The
Debian package ``chromium`` provides the browser; nothing is fetched.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["find_chromium", "RenderedPage", "render_page"]

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]
# console messages logged by Chromium on stderr: "... CONSOLE(12)] "message", source: file:///... (12)"
_CONSOLE = re.compile(r'CONSOLE(?:\(\d+\))?\]?\s*"?(.*)')


def find_chromium() -> str | None:
    """Path of a Chromium (or Chrome) executable, or None."""
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


@dataclass
class RenderedPage:
    dom: str                 # the DOM after the page's scripts ran
    console: list[str]       # console messages and uncaught errors
    screenshot: Path | None


def _run(browser: str, args: list[str], profile: str, timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run([browser, *_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=timeout_s)


def render_page(page: str | Path, screenshot: str | Path | None = None, size: tuple[int, int] = (1400, 1800),
                budget_ms: int = 8000, timeout_s: float = 120.0, browser: str | None = None) -> RenderedPage:
    """Open a local HTML file (or an http:// address on this machine) in headless Chromium: its DOM after
    ``budget_ms`` of virtual time, the console messages, and, with ``screenshot``, a PNG of the top
    ``size`` pixels."""
    browser = browser or find_chromium()
    if browser is None:
        raise FileNotFoundError("no Chromium found (Debian package chromium)")
    url = str(page) if str(page).startswith("http://") else Path(page).resolve().as_uri()
    common = [f"--window-size={size[0]},{size[1]}", f"--virtual-time-budget={budget_ms}"]
    with tempfile.TemporaryDirectory(prefix="hil-chromium-") as profile:
        dom = _run(browser, [*common, "--dump-dom", url], profile, timeout_s)
        if dom.returncode != 0:
            raise RuntimeError(f"{browser} --dump-dom failed ({dom.returncode}): {dom.stderr[-2000:]}")
        shot = None
        if screenshot is not None:
            shot = Path(screenshot).resolve()
            shot.parent.mkdir(parents=True, exist_ok=True)
            r = _run(browser, [*common, f"--screenshot={shot}", url], profile, timeout_s)
            if r.returncode != 0 or not shot.exists():
                raise RuntimeError(f"{browser} --screenshot failed ({r.returncode}): {r.stderr[-2000:]}")
    console = [m.group(1) for line in dom.stderr.splitlines() if (m := _CONSOLE.search(line))]
    return RenderedPage(dom.stdout, console, shot)
