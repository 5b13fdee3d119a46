"""The status page in a real headless Chromium (Debian's ``chromium``; ``.ci/run``
installs it): the token once, then a session cookie; rows shown; text escaped."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import TOKEN, Peer

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no chromium on PATH (.ci/run installs Debian's chromium)")
    raise AssertionError


def browse(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                           *extra, url], capture_output=True, text=True, timeout=90)


def test_the_page_loads_with_the_token_and_shows_every_monitor(peers, tmp_path) -> None:
    p: Peer = peers("alpha", monitors={"tick": "[echo, hi]", "tock": "[date, +%N]"})
    p.wait_polled("tick")
    p.wait_polled("tock")
    dom = browse(f"{p.url}/?token={TOKEN}", tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert 'data-monitor="tick"' in html and 'data-monitor="tock"' in html
    assert "monitors · alpha" in html
    assert TOKEN not in html
    shot = tmp_path / "status-page.png"
    taken = browse(f"{p.url}/?token={TOKEN}", tmp_path / "profile2",
                   f"--screenshot={shot}", "--window-size=412,915")
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.stat().st_size > 1000
    print(f"status page screenshot: {shot}")


def test_the_token_is_needed_once_then_a_session_cookie(peers) -> None:
    p: Peer = peers("alpha", monitors={"tick": "[echo, hi]"})
    assert httpx.get(p.url + "/", timeout=10).status_code == 401
    assert httpx.get(p.url + "/?token=wrong", timeout=10).status_code == 401
    with httpx.Client(timeout=10) as browser:
        first = browser.get(p.url + f"/?token={TOKEN}")
        assert first.status_code == 303 and first.headers["location"] == "/"
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        page = browser.get(p.url + "/")
        assert page.status_code == 200 and 'data-monitor="tick"' in page.text
        assert 'http-equiv="refresh"' in page.text and "width=device-width" in page.text
    by_cookie = httpx.get(p.url + "/", cookies={"monitors_token": TOKEN}, timeout=10)
    assert by_cookie.status_code == 200


def test_text_from_sources_is_escaped(peers) -> None:
    p: Peer = peers("alpha", start=False)
    p.repo.write("monitors.d/x.yml", """
        name: x
        source:
          type: poll
          command: [echo, "<script>alert(1)</script>"]
          interval: 1s
        action:
          type: notify
          channel: log
        """)
    p.start()
    p.wait_polled("x")
    page = httpx.get(p.url + "/", cookies={"monitors_token": TOKEN}, timeout=10).text
    assert "<script>" not in page
    assert "&lt;script&gt;" in page


def test_open_on_loopback_needs_no_token(peers) -> None:
    import os

    p: Peer = peers("alpha", start=False)
    p.repo.write("monitors.toml", "[http]\nopenOnLoopback = true\n")
    os.chmod(p.repo.root / "monitors.toml", 0o644)
    p.start()
    assert httpx.get(p.url + "/", timeout=10).status_code == 200
    assert p.get("/v1/status", token=None).status_code == 401
