"""What the view helper process (``server.offload``) computes: the heavy answers.

``GET /v1/monitors``, ``/v1/fingerprints``, the status page (``GET /``) and
``POST /v1/plan`` read every layer, the registry and each monitor's state, or parse
and plan a whole desired set: 100-250 ms of CPU for 1,000 monitors, with JSON or
HTML of 300-800 KB. On the daemon's event loop that is a step during which no poll
can start; in a thread of the daemon it holds the interpreter lock the loop needs.
Each job here takes plain values (settings, the status reply, the secrets to mask)
and returns the finished, redacted answer as bytes, so the daemon only writes it out.

This module imports neither aiohttp nor the daemon (the worker's start-up stays
small); its functions are pickled by name.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reconciler import redaction

if TYPE_CHECKING:
    from reconciler.settings import Settings

API_VERSION = "v1"


def encode(data: Mapping[str, Any], redactor: redaction.Redactor) -> str:
    """The JSON answer of ``data`` with ``apiVersion`` first and every secret masked:
    on the text when no secret needs JSON escaping (one pass), else on the values
    before encoding."""
    document = {"apiVersion": API_VERSION, **data}
    secrets = redactor.secrets
    if not secrets:
        return json.dumps(document, ensure_ascii=False, default=str)
    if any(json.dumps(s)[1:-1] != s for s in secrets):
        return json.dumps(redactor.redact_value(document), ensure_ascii=False, default=str)
    return redactor.redact(json.dumps(document, ensure_ascii=False, default=str))


FRESH = 0.5
"""Seconds the worker reuses its last reading of the rows (``_rows``) for the other views:
the list, the page and the fingerprints asked together read the state once."""

_last_rows: tuple[float, Settings, dict[str, Any]] | None = None
"""(``time.monotonic()``, settings, rows) of the last reading, in the worker."""


def _rows(cfg: Settings, status: Mapping[str, Any]) -> dict[str, Any]:
    """``client.views.rows`` of the device of ``cfg``, read at most once per ``FRESH``
    seconds."""
    global _last_rows
    from reconciler.client import views

    now = time.monotonic()
    if _last_rows is not None and now - _last_rows[0] < FRESH and _last_rows[1] == cfg:
        return _last_rows[2]
    doc = views.rows(cfg, status=status)
    _last_rows = (now, cfg, doc)
    return doc


def rows_json(cfg: Settings, status: Mapping[str, Any], secrets: tuple[str, ...]) -> bytes:
    """Job: ``client.views.rows`` of this device as the encoded, redacted JSON answer of
    ``GET /v1/monitors`` (UTF-8 bytes).

    Raises:
        errors.MonitorsError: the state directory or layers are unreadable.
    """
    return encode(_rows(cfg, status), redaction.Redactor(secrets)).encode()


FINGERPRINT_KEYS = ("name", "fingerprint", "scope", "owner", "status")


def fingerprints_json(cfg: Settings, status: Mapping[str, Any],
                      secrets: tuple[str, ...]) -> bytes:
    """Job: ``GET /v1/fingerprints``'s answer, ``{"apiVersion", "device", "fingerprints":
    [{name, fingerprint, scope, owner, status}]}`` from the rows (UTF-8 bytes, redacted).

    Raises:
        errors.MonitorsError: the state directory or layers are unreadable.
    """
    rows = _rows(cfg, status)["monitors"]
    found = [{k: r.get(k) for k in FINGERPRINT_KEYS} for r in rows]
    return encode({"device": cfg.device, "fingerprints": found},
                  redaction.Redactor(secrets)).encode()


def page_html(cfg: Settings, status: Mapping[str, Any], secrets: tuple[str, ...]) -> bytes:
    """Job: the status page of the rows (``server.pageview``), redacted (UTF-8 bytes).
    The values are redacted before they are rendered (HTML escaping would hide a secret
    holding ``&``, ``<`` or a quote from a pass over the page), the page after.

    Raises:
        errors.MonitorsError: the state directory or layers are unreadable.
    """
    from reconciler.server import pageview

    redactor = redaction.Redactor(secrets)
    page = pageview.html(redactor.redact_value(_rows(cfg, status)),
                         redactor.redact_value(dict(status)), device=cfg.device)
    return redactor.redact(page).encode()


def plan_json(cfg: Settings, body: bytes, secrets: tuple[str, ...]) -> tuple[int, bytes]:
    """Job: ``POST /v1/plan``: ``body`` (``{"monitors": [monitor JSON]}``, the running
    registry's monitor shape) planned against this device's running set as the daemon
    last published it (``<state>/running.json``, written after every reconcile), with
    that running set. Returns ``(HTTP status, redacted JSON answer)``: 200, or 400 with
    ``error`` when the body is not JSON or not monitors.

    Raises:
        errors.MonitorsError: the state directory is unreadable.
    """
    from reconciler import timestamps
    from reconciler.planning import desired as desired_mod
    from reconciler.planning import plan as plan_mod
    from reconciler.state import registry as registry_mod

    redactor = redaction.Redactor(secrets)

    def refused(message: str) -> tuple[int, bytes]:
        return 400, encode({"error": f"bad request: {message}"}, redactor).encode()

    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        return refused(f"the body is not JSON ({e})")
    docs = doc.get("monitors") if isinstance(doc, dict) else None
    if not isinstance(docs, list) or not all(isinstance(d, dict) for d in docs):
        return refused('expected {"monitors": [monitor, ...]}')
    try:
        wanted = {m.name: m for m in (registry_mod.monitor_from_json(d) for d in docs)}
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        return refused(f"not a monitor: {type(e).__name__}: {e}")
    reg = registry_mod.load(cfg.state_dir)
    running = {n: e.monitor for n, e in reg.entries.items()}
    basis = plan_mod.Basis(
        device=cfg.device, daemon_running=True, daemon_pid=reg.pid,
        generation=reg.generation, digest=reg.digest, commit=reg.commit, dirty=reg.dirty,
        created_at=timestamps.utc_seconds(), root=cfg.root)
    made = plan_mod.make(desired_mod.Desired(monitors=wanted, excluded={}, invalid={}),
                         running, basis)
    answer = {"device": cfg.device, "plan": made.to_json(),
              "running": [registry_mod.monitor_to_json(m) for _, m in sorted(running.items())]}
    return 200, encode(answer, redactor).encode()
