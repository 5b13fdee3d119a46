"""``client.settings_mismatch`` and ``protocol.settings_digest``: how a CLI tells that the
running daemon uses other settings."""

from __future__ import annotations

from pathlib import Path

from reconciler.client import control as client
from reconciler.daemon import protocol
from reconciler.settings import Settings


def _cfg(tmp_path: Path, *, device: str = "vm", toml: dict[str, object] | None = None
         ) -> Settings:
    return Settings(root=tmp_path, user_dir=tmp_path / "monitors.d",
                    system_dir=tmp_path / "system", overlays_dir=tmp_path / "o",
                    state_dir=tmp_path / ".history", fleet_file=tmp_path / "fleet.yaml",
                    device=device, toml=toml or {})


def test_settings_mismatch_names_what_differs(tmp_path: Path) -> None:
    started = _cfg(tmp_path, toml={"device": "vm"})
    status = {"ok": True, "pid": 42, "device": "vm", "root": str(tmp_path),
              "settingsDigest": protocol.settings_digest(started)}
    assert client.settings_mismatch(started, status) is None
    assert client.settings_mismatch(started, None) is None
    edited = _cfg(tmp_path, device="otherbox", toml={"device": "otherbox"})
    assert client.settings_mismatch(edited, status) == (
        "the daemon runs with other settings (device vm; monitors.toml changed since it "
        "started): restart it (`monitors stop`, then `monitors apply`) to use them (daemon pid 42)")
    layers = _cfg(tmp_path, toml={"device": "vm", "layers": {"user": "nope.d"}})
    assert "(monitors.toml changed since it started)" in str(
        client.settings_mismatch(layers, status))
    # an older daemon without settingsDigest: device and root still compared
    assert client.settings_mismatch(edited, {"device": "vm", "root": str(tmp_path)}) == (
        "the daemon runs with other settings (device vm): restart it (`monitors stop`, then "
        "`monitors apply`) to use them")
    other_root = {**status, "root": str(tmp_path / "elsewhere")}
    assert f"root {tmp_path / 'elsewhere'}" in str(client.settings_mismatch(started, other_root))


def test_settings_digest_ignores_key_order_and_sees_values(tmp_path: Path) -> None:
    a = _cfg(tmp_path, toml={"device": "vm", "daemon": {"resync": "60s"}})
    b = _cfg(tmp_path, toml={"daemon": {"resync": "60s"}, "device": "vm"})
    c = _cfg(tmp_path, toml={"daemon": {"resync": "61s"}, "device": "vm"})
    assert protocol.settings_digest(a) == protocol.settings_digest(b) != protocol.settings_digest(c)
