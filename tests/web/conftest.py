"""Headless Chromium for the page tests: Debian's ``chromium`` package driven by the PyPI playwright client.

Playwright's own browser download is never used (no network in CI); the package is installed with apt
when missing and we run as root, else the tests are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
#: Flags that work offline and without a sound card or GPU; audio may start without a click.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--autoplay-policy=no-user-gesture-required",
]
_ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


def _ensure_chromium() -> str | None:
    """The reason Chromium cannot run here, or None once it is installed."""
    if CHROMIUM.exists():
        return None
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return "Debian's chromium is not installed and cannot be installed here (needs apt-get as root)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    return None if CHROMIUM.exists() else "apt-get install chromium did not provide /usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Module-scoped: Playwright's sync API keeps an event loop running on this thread while it is open, and
    tests elsewhere that call ``asyncio.run`` must not find it still running."""
    playwright_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is not installed"
    )
    reason = _ensure_chromium()
    if reason is not None:
        pytest.skip(reason)
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where tests leave files for people to look at (screenshots); kept by CI."""
    _ARTIFACTS.mkdir(exist_ok=True)
    return _ARTIFACTS


def pytest_collection_modifyitems(config: Any, items: list[pytest.Item]) -> None:
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
