"""``server.jobs``: the answers the view helper process makes (the rows of ``list
--json``, the fingerprints, the status page, a plan), redacted, as bytes."""

from __future__ import annotations

import json
from pathlib import Path

from reconciler import settings
from reconciler.server import jobs
from tests import factories


def test_rows_json_is_the_list_document_with_secrets_masked(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "monitors.d").mkdir(parents=True)
    (root / "monitors.d" / "disk.yml").write_text(factories.monitor_yaml("disk", "df -h"))
    cfg = settings.load(root=root, device="laptop")
    plain = json.loads(jobs.rows_json(cfg, {}, ()))
    assert plain["apiVersion"] == "v1"
    assert [row["name"] for row in plain["monitors"]] == ["disk"]
    assert plain["problems"] == []
    assert plain["device"] == "laptop"
    masked = jobs.rows_json(cfg, {}, ("laptop",))  # a secret equal to a value shown
    assert b"laptop" not in masked and json.loads(masked)["device"] == "***"


def _repo(base: Path, *names: str) -> settings.Settings:
    root = base / "repo"
    (root / "monitors.d").mkdir(parents=True)
    for name in names:
        (root / "monitors.d" / f"{name}.yml").write_text(
            factories.monitor_yaml(name, f"echo {name}"))
    return settings.load(root=root, device="laptop")


def test_fingerprints_and_the_page_are_made_from_the_rows_and_redacted(tmp_path: Path) -> None:
    cfg = _repo(tmp_path, "disk", "x<script>y")
    rows = json.loads(jobs.rows_json(cfg, {}, ()))["monitors"]
    prints = json.loads(jobs.fingerprints_json(cfg, {}, ()))
    assert prints["apiVersion"] == "v1" and prints["device"] == "laptop"
    assert prints["fingerprints"] == [{k: r.get(k) for k in jobs.FINGERPRINT_KEYS}
                                      for r in rows]
    assert all(f["fingerprint"] for f in prints["fingerprints"])
    page = jobs.page_html(cfg, {"generation": 7}, ()).decode()
    assert "generation 7" in page and ">disk<" in page
    assert "x&lt;script&gt;y" in page and "x<script>" not in page  # escaped
    masked = jobs.page_html(cfg, {}, ("laptop",)).decode()
    assert "laptop" not in masked and "***" in masked
    assert b"laptop" not in jobs.fingerprints_json(cfg, {}, ("laptop",))


def test_a_secret_html_escaping_would_change_is_masked_on_the_page(tmp_path: Path) -> None:
    secret = "p&ss<w0rd>'long"
    root = tmp_path / "repo"
    (root / "monitors.d").mkdir(parents=True)
    (root / "monitors.d" / "x.yml").write_text(
        factories.monitor_yaml("x", f"echo \"{secret}\""))
    cfg = settings.load(root=root, device="laptop")
    page = jobs.page_html(cfg, {}, (secret,)).decode()
    assert "w0rd" not in page and "***" in page


def test_the_worker_reuses_a_reading_of_the_rows_only_for_the_same_device(
        tmp_path: Path) -> None:
    one = _repo(tmp_path / "one", "disk")
    two = _repo(tmp_path / "two", "cpu", "net")
    assert [r["name"] for r in json.loads(jobs.rows_json(one, {}, ()))["monitors"]] == [
        "disk"]
    assert [f["name"] for f in json.loads(jobs.fingerprints_json(two, {}, ()))[
        "fingerprints"]] == ["cpu", "net"]  # within FRESH of the first reading


def test_a_plan_body_that_is_not_monitors_is_a_400_of_one_line(tmp_path: Path) -> None:
    cfg = _repo(tmp_path, "disk")
    for body, expected in ((b"{not json", "the body is not JSON"),
                           (b'{"monitors": {}}', 'expected {"monitors"'),
                           (b'{"monitors": [{"name": "x"}]}', "not a monitor")):
        status, answer = jobs.plan_json(cfg, body, ())
        assert status == 400
        assert expected in json.loads(answer)["error"]
    status, answer = jobs.plan_json(cfg, b'{"monitors": []}', ())
    assert status == 200 and json.loads(answer)["running"] == []
