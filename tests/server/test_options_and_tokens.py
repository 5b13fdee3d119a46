"""``[http]`` options and the token rules, without a daemon."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from reconciler import errors, settings, tokens
from reconciler.server import options
from tests.conftest import Repo


def cfg_with(repo: Repo, toml: str) -> settings.Settings:
    path = repo.write("monitors.toml", toml)
    os.chmod(path, 0o644)
    return settings.load(root=repo.root, device="d")


def test_listen_default_env_and_off(repo: Repo) -> None:
    cfg = cfg_with(repo, "")
    assert options.load(cfg, environ={}).listen == "127.0.0.1:8765"
    assert options.load(cfg, environ={"MONITORS_HTTP_LISTEN": ""}).enabled is False
    on = options.load(cfg_with(repo, '[http]\nlisten = "[::1]:0"\n'), environ={})
    assert on.host_port == ("::1", 0)
    off = options.load(cfg_with(repo, '[http]\nlisten = ""\n'), environ={})
    assert not off.enabled


@pytest.mark.parametrize(("toml", "message"), [
    ('[http]\nlisten = "8765"\n', "http.listen: address '8765' is not host:port"),
    ('[http]\ncertFile = "c.pem"\n', "certFile and keyFile go together"),
    ('[http]\nrequestTimeout = "soon"\n', "http.requestTimeout"),
])
def test_bad_http_settings_are_one_line(repo: Repo, toml: str, message: str) -> None:
    with pytest.raises(errors.ConfigError, match=re.escape(message)):
        options.load(cfg_with(repo, toml), environ={})


def test_token_sources_in_order_and_the_0600_rule(repo: Repo, tmp_path: Path) -> None:
    cfg = cfg_with(repo, "")
    assert tokens.read(cfg, environ={}) is None
    assert tokens.read(cfg, environ={"MONITORS_TOKEN": " env-token "}) == "env-token"
    path = tokens.create(cfg.state_dir / tokens.DEFAULT_FILE)
    assert tokens.read(cfg, environ={}) == path.read_text().strip()
    assert tokens.read(cfg, environ={"MONITORS_TOKEN": "env"}) == "env"
    os.chmod(path, 0o640)
    with pytest.raises(errors.ConfigError, match="must be mode 0600, not 0640"):
        tokens.read(cfg, environ={})
    named = cfg_with(repo, '[http]\ntokenFile = "missing.token"\n')
    with pytest.raises(errors.ConfigError, match=r"missing\.token: cannot read the token file"):
        tokens.read(named, environ={})


def test_matches_needs_both_and_equality() -> None:
    assert tokens.matches("abc", "abc")
    assert not tokens.matches("abd", "abc")
    assert not tokens.matches("", "abc") and not tokens.matches("abc", None)
    assert not tokens.matches("é", "e")
