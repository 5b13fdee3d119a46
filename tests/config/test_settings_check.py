"""monitors.toml and the fleet file against their schemas, with positions
(``config.settings_check``, ``config.tomlpos``)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from reconciler import errors, fleet, settings
from reconciler.config import schemas, settings_check, tomlpos

TOML = """\
# settings
devce = "x"
"quoted.key" = 'v'   # a comment
[daemon]
resyncc = "10s"
[agentz.foo]
argv = ["a",
  "b", # inside an array
  "c"]
[channels.x]
url = \"\"\"multi
line "" \\\""" still\"\"\"
rateLimit = {max = 3, per = "1m"}
a.b . c = 1979-05-27 07:32:00Z
[[arr]]
x = 1
[[arr]]
x = 2
[arr.sub]
y = 3
"""


def test_scan_finds_keys_and_values_of_every_toml_form() -> None:
    tomllib.loads(TOML)  # the input is valid TOML
    found = tomlpos.scan(TOML)
    assert found.keys[("devce",)] == (2, 1) and found.values[("devce",)] == (2, 9)
    assert found.keys[("quoted.key",)] == (3, 1)
    assert found.keys[("daemon", "resyncc")] == (5, 1)
    assert found.keys[("agentz",)] == (6, 2) and found.keys[("agentz", "foo")] == (6, 9)
    assert found.values[("agentz", "foo", "argv", 2)] == (9, 3)
    assert found.keys[("channels", "x", "rateLimit")] == (13, 1)  # after a multi-line string
    assert found.values[("channels", "x", "rateLimit", "per")] == (13, 29)
    assert found.keys[("channels", "x", "a", "b", "c")] == (14, 7)
    assert found.values[("arr", 1)] == (17, 1)
    assert found.keys[("arr", 1, "sub", "y")] == (20, 1)


@pytest.mark.parametrize("text", ["a = [", "[x\ny = 1", 'k = "open', "= 1", "a = '''x"])
def test_scan_of_broken_text_never_raises(text: str) -> None:
    tomlpos.scan(text)


def test_document_positions_fall_back_to_the_parent() -> None:
    doc = tomlpos.document(tomllib.loads(TOML), TOML, file="m.toml")
    assert doc.position(("daemon", "resyncc"), key=True) == (5, 1)
    assert doc.position(("daemon", "nothing"), key=True) == (4, 2)
    assert doc.data["channels"]["x"]["a"]["b"]["c"] == "1979-05-27T07:32:00+00:00"
    assert tomlpos.document({"a": 1}, None, file="m.toml").position(("a",)) == (1, 1)


def _cfg(root: Path, text: str) -> settings.Settings:
    (root / "monitors.d").mkdir(exist_ok=True)
    (root / "monitors.toml").write_text(text, encoding="utf-8")
    return settings.load(root=root, device="box")


def test_the_issues_three_typos_are_unknown_fields_with_did_you_mean(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, 'devce = "x"\n[daemon]\nresyncc = "10s"\n[agentz.foo]\nargv = ["a"]\n')
    found = [(p.line, p.col, p.field, p.message, p.rule)
             for p in settings_check.settings_problems(cfg)]
    assert found == [
        (1, 1, "devce", "unknown field 'devce' (did you mean 'device'?)", "unknown-field"),
        (3, 1, "daemon.resyncc", "unknown field 'resyncc' (did you mean 'resync'?)",
         "unknown-field"),
        (4, 2, "agentz", "unknown field 'agentz' (did you mean 'agents'?)", "unknown-field"),
    ]


def test_every_documented_key_is_valid(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, """\
        device = "box"
        stateDir = ".history"
        [layers]
        user = "monitors.d"
        system = "system"
        overlays = "monitors.d/overlays"
        [fleet]
        file = "fleet.yaml"
        [agents.claude]
        argv = ["claude", "-p", "{prompt}"]
        [routines.deploy]
        argv = ["./deploy.sh", "{prompt}"]
        cwd = "~/src/app"
        env = {DEPLOY_TOKEN = "${DEPLOY_TOKEN}"}
        timeout = "10m"
        overlap = "queue"
        [channels.phone]
        url = "ntfy://ntfy.sh/${NTFY_TOPIC}"
        timeout = "10s"
        maxAttempts = 3
        rateLimit = {max = 30, per = "1m"}
        [owner]
        channels = ["phone", "log"]
        [system]
        url = "https://example.com/x.git"
        ref = "main"
        path = "monitors/"
        [daemon]
        resync = "60s"
        [etcd]
        endpoints = ["https://etcd-1:2379", "https://etcd-2:2379"]
        prefix = "/monitors/"
        ttl = "10s"
        caFile = "tls/ca.pem"
        certFile = "tls/client.pem"
        keyFile = "tls/client.key"
        username = "monitors"
        password = "${ETCD_PASSWORD}"
        """.replace("        ", ""))
    assert settings_check.settings_problems(cfg) == []


def test_etcd_needs_endpoints_and_a_duration_ttl(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, '[etcd]\nttl = "10 s"\nendpoint = ["x"]\n')
    found = {(p.field, p.rule) for p in settings_check.settings_problems(cfg)}
    assert ("etcd.ttl", "bad-duration") in found
    assert ("etcd.endpoint", "unknown-field") in found


def test_wrong_values_are_reported_at_the_value(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, '[daemon]\nresync = "10 s"\n[channels.x]\nurl = "json://h"\n'
                         'maxAttempts = 50\n[routines.r]\nargv = ["a"]\noverlap = "never"\n')
    found = {(p.line, p.col, p.field, p.rule) for p in settings_check.settings_problems(cfg)}
    assert found == {(2, 10, "daemon.resync", "bad-duration"),
                     (5, 15, "channels.x.maxAttempts", "schema"),
                     (8, 11, "routines.r.overlap", "schema")}


@pytest.mark.parametrize(("text", "expected"), [
    ('[http]\nlisten = "nohost"\n', (2, 10, "http.listen", "bad-address")),
    ('[http]\nlisten = "127.0.0.1:99999"\n', (2, 10, "http.listen", "bad-address")),
    ('[http]\ncertFile = "a.pem"\n', (1, 2, "http.keyFile", "settings")),
    ('[http]\nkeyFile = "a.key"\n', (1, 2, "http.certFile", "settings")),
])
def test_http_settings_the_daemon_refuses_are_lint_errors(tmp_path: Path, text: str,
                                                          expected: tuple[object, ...]) -> None:
    # lint passed these and `monitors run` then refused to start
    cfg = _cfg(tmp_path, text)
    found = [(p.line, p.col, p.field, p.rule) for p in settings_check.settings_problems(cfg)]
    assert found == [expected]


@pytest.mark.parametrize("listen", ["127.0.0.1:0", "[::1]:8765", ""])
def test_http_listen_port_zero_and_off_are_valid(tmp_path: Path, listen: str) -> None:
    assert settings_check.settings_problems(_cfg(tmp_path, f'[http]\nlisten = "{listen}"\n')) == []


def test_a_file_edited_since_it_was_read_gives_no_misleading_positions(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, '\n\n\ndevce = "x"\n')
    (tmp_path / "monitors.toml").write_text('devce = "x"\nmore = 1\n')
    [problem] = settings_check.settings_problems(cfg)
    assert (problem.line, problem.col, problem.field) == (1, 1, "devce")


def test_summary_is_one_line_naming_how_many_more(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, 'devce = "x"\n[daemon]\nresyncc = "10s"\n')
    line = settings_check.summary(settings_check.settings_problems(cfg))
    assert line is not None and "\n" not in line
    assert line.endswith("monitors.toml:1:1: devce: unknown field 'devce' (did you mean "
                         "'device'?) (and 1 more; `monitors lint` lists them)")
    assert settings_check.summary([]) is None


def test_fleet_unknown_key_duplicate_key_and_device(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("devices:\n  - name: a\n    adress: x\n  - name: a\n"
                    "    name: b\n  - name: b\n  - name: b\n")
    found = {(p.line, p.col, p.field, p.rule) for p in settings_check.fleet_problems(path)}
    assert (3, 5, "devices.0.adress", "unknown-field") in found
    assert any(rule == "duplicate-key" and line == 5 for line, _, _, rule in found)
    assert (7, 11, "devices.3.name", "duplicate-name") in found
    messages = [p.message for p in settings_check.fleet_problems(path)]
    assert "unknown field 'adress' (did you mean 'address'?)" in messages


def test_fleet_load_raises_the_first_problem_with_its_position(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("devices:\n  - name: a\n    interactiv: true\n")
    with pytest.raises(errors.ConfigError,
                       match=r"fleet.yaml:3:5: devices.0.interactiv: unknown field "
                             r"'interactiv' \(did you mean 'interactive'\?\)$"):
        fleet.load(path)
    path.write_text("devices:\n  - {name: a, address: 'h:1', interactive: true}\n")
    loaded = fleet.load(path)
    assert loaded.exists and loaded.interactive is not None
    assert loaded.interactive.address == "h:1"
    assert not fleet.load(tmp_path / "none.yaml").exists


def test_fleet_load_does_not_import_pure_python_jsonschema(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "fleet.yaml").write_text("devices:\n  - name: a\n")
    code = ("import sys\nfrom pathlib import Path\nfrom reconciler import fleet\n"
            f"fleet.load(Path({str(tmp_path / 'fleet.yaml')!r}))\n"
            "print('jsonschema' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_settings_schema_is_shipped_and_valid_draft_2020_12() -> None:
    import jsonschema

    doc = json.loads(schemas.text("settings"))
    jsonschema.Draft202012Validator.check_schema(doc)
    assert doc["additionalProperties"] is False
    assert set(doc["properties"]) == {"device", "stateDir", "layers", "fleet", "agents",
                                      "routines", "channels", "owner", "system", "daemon",
                                      "git", "http", "etcd"}


@pytest.mark.parametrize(("text", "where"), [
    ("[daemon]\nresync 10\n", ":2:8: invalid TOML: Expected '=' after a key"),
    ("[daemon]\n[daemon]\n", ":2:8: invalid TOML: Cannot declare ('daemon',) twice"),
])
def test_invalid_toml_is_one_line_with_its_position(tmp_path: Path, text: str,
                                                    where: str) -> None:
    (tmp_path / "monitors.toml").write_text(text)
    with pytest.raises(errors.ConfigError) as caught:
        settings.load(root=tmp_path, device="box")
    assert str(caught.value).startswith(f"{tmp_path / 'monitors.toml'}{where}")
    (tmp_path / "monitors.toml").write_bytes(b'a = "\xff"\n')
    with pytest.raises(errors.ConfigError, match=r"monitors.toml: not UTF-8 \(byte 5\)$"):
        settings.load(root=tmp_path, device="box")


@pytest.mark.parametrize(("text", "where"), [
    ("x = " + "[" * 300 + "]" * 300 + "\n", ":1:69: arrays and inline tables nested deeper "
     "than 64 levels"),
    ("# [[[ '\ns = \"[[\\\"\"\nx = " + "[" * 500 + "]" * 500 + "\n",
     ":3:69: arrays and inline tables nested deeper than 64 levels"),
    ("x = " + "{a = " * 300 + "1" + "}" * 300 + "\n", ":1:325: arrays and inline tables"),
    ("[" + ".".join(["a"] * 70) + "]\n", ": tables nested deeper than 64 levels"),
])
def test_deeply_nested_toml_is_one_line_not_a_recursion_error(tmp_path: Path, text: str,
                                                              where: str) -> None:
    (tmp_path / "monitors.toml").write_text(text)
    with pytest.raises(errors.ConfigError) as caught:
        settings.load(root=tmp_path, device="box")
    assert str(caught.value).startswith(f"{tmp_path / 'monitors.toml'}{where}")
    (tmp_path / "monitors.toml").write_text("x = " + "[" * 64 + "]" * 64 + "\n")
    settings.load(root=tmp_path, device="box")  # 64 levels: the schema's to judge


@pytest.mark.parametrize("depth", [300, 500])
def test_deeply_nested_fleet_file_is_one_problem(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("devices:\n  - name: a\n    address: " + "[" * depth + "]" * depth + "\n")
    found = settings_check.fleet_problems(path)
    assert [(p.rule, p.severity.value) for p in found] == [("yaml-depth", "error")]
    with pytest.raises(errors.ConfigError, match="nested deeper than 64"):
        fleet.load(path)


def test_fleet_addresses_must_be_host_and_port(tmp_path: Path) -> None:
    """``x:99999`` and ``nohostport`` passed lint and plan."""
    path = tmp_path / "fleet.yaml"
    path.write_text("devices:\n  - {name: a, address: 'x:99999'}\n"
                    "  - {name: b, address: nohostport}\n  - {name: c, address: 'h:８０'}\n"
                    "  - {name: d, address: 'h:80'}\n  - {name: e, address: '[::1]:7'}\n")
    found = [(p.line, p.col, p.field, p.rule, p.message)
             for p in settings_check.fleet_problems(path)]
    assert found == [
        (2, 24, "devices.0.address", "bad-address",
         "address 'x:99999': port 99999 is outside 1-65535"),
        (3, 24, "devices.1.address", "bad-address", "address 'nohostport' is not host:port"),
        (4, 24, "devices.2.address", "bad-address", "address 'h:８０' is not host:port")]
    with pytest.raises(errors.ConfigError, match=r"fleet.yaml:2:24: devices.0.address: "):
        fleet.load(path)
