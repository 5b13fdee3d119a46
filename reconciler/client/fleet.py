"""The fleet over HTTP: ask every peer in fleet.yaml at once, and name the ones that did not answer.

A peer is a device of the fleet file with an ``address`` other than this
device. Requests go to ``<origin><path>`` concurrently (httpx, one ``TIMEOUT``
each; the origin and, for ``https://`` peers, the verified TLS context come from
``reconciler.fleetlink``: one client per trust, so peers with different
``caFile`` values are asked at once) with the peer's token: the environment variable
named by its ``tokenEnv``, else this device's own (``reconciler.tokens``). A peer
that cannot be reached, fails TLS verification, refuses the token, or answers
something that is not API v1 JSON is *unreachable* with a one-line error; silence
is never taken as "nothing there".

Used by ``list`` (``listing``), ``add`` (``duplicates``), ``plan --device``
(``plan_against``). Never prints; never writes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler import errors, fleet, fleetlink, settings, tokens

if TYPE_CHECKING:
    import ssl

TIMEOUT = 2.0
"""Seconds each peer gets to answer."""
API_VERSION = "v1"


@dataclass(frozen=True, slots=True)
class Answers:
    """What the peers said: ``answers`` device -> JSON document, ``unreachable`` device ->
    one-line error (both in fleet-file order)."""

    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)


def peers(cfg: settings.Settings, fleet_doc: fleet.Fleet | None = None) -> list[fleet.Device]:
    """The devices of the fleet file with an address, this device excepted."""
    doc = fleet_doc if fleet_doc is not None else fleet.load(cfg.fleet_file)
    return [d for d in doc.devices if d.address and d.name != cfg.device]


def token_for(device: fleet.Device, cfg: settings.Settings,
              environ: Mapping[str, str] | None = None) -> str | None:
    """The token to send ``device``: ``$<tokenEnv>`` when set, else this device's own.

    Raises:
        errors.ConfigError: this device's token file is refused (mode, owner).
    """
    env = os.environ if environ is None else environ
    if device.token_env:
        return env.get(device.token_env) or None
    return tokens.read(cfg, environ=dict(env))


def _error_line(e: Exception, link: fleetlink.Link | None = None) -> str:
    import httpx

    if isinstance(e, errors.MonitorsError):
        return str(e)
    tls = fleetlink.failure(link, e) if link is not None else None
    if tls is not None:
        return tls
    if isinstance(e, httpx.TimeoutException):
        return f"timed out after {TIMEOUT:g}s"
    if isinstance(e, httpx.ConnectError):
        cause = e.__cause__ or e.__context__
        text = str(cause or e).split("] ")[-1] or type(e).__name__
        return f"cannot connect: {text}"
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


async def _ask(client: Any, link: fleetlink.Link, device: fleet.Device, method: str,
               path: str, token: str | None, body: Any) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answer = await client.request(method, link.url(path), headers=headers, json=body)
    try:
        doc = answer.json()
    except ValueError:
        doc = None
    if answer.status_code != 200:
        why = doc.get("error") if isinstance(doc, dict) else None
        if answer.status_code == 401 and not token:
            why = f"{why} (no token to send: set {device.token_env or tokens.ENV})"
        raise errors.MonitorsError(f"HTTP {answer.status_code}: {why or answer.reason_phrase}")
    if not isinstance(doc, dict) or doc.get("apiVersion") != API_VERSION:
        raise errors.MonitorsError(f"not a monitors API {API_VERSION} answer")
    return doc


async def ask_all(cfg: settings.Settings, path: str, *, method: str = "GET",
                  body: Any = None, devices: list[fleet.Device] | None = None,
                  timeout: float = TIMEOUT) -> Answers:
    """``method path`` on every peer (or ``devices``) at once; see ``Answers``.

    A peer whose address does not parse, whose ``caFile`` cannot be used or whose
    token file is refused is unreachable with that line, without a request."""
    import contextlib

    import httpx

    targets = peers(cfg) if devices is None else devices
    out = Answers()
    if not targets:
        return out
    asked: list[tuple[fleet.Device, fleetlink.Link, str | None, ssl.SSLContext]] = []
    refused: dict[str, str] = {}
    for d in targets:
        try:
            link = fleetlink.link(d, fleet_file=cfg.fleet_file.name)
            verify = link.verify()  # every client verifies: plain-HTTP ones never use it
            asked.append((d, link, token_for(d, cfg), verify))
        except (errors.ConfigError, ValueError) as e:
            refused[d.name] = str(e)
    async with contextlib.AsyncExitStack() as stack:
        clients: dict[ssl.SSLContext, httpx.AsyncClient] = {}  # one per trust
        for _, _, _, verify in asked:
            if verify not in clients:
                clients[verify] = await stack.enter_async_context(httpx.AsyncClient(
                    timeout=timeout, follow_redirects=False, trust_env=False,
                    verify=verify))
        results = await asyncio.gather(
            *(_ask(clients[verify], link, d, method, path, token, body)
              for d, link, token, verify in asked),
            return_exceptions=True)
    for (device, link, _, _), result in zip(asked, results, strict=True):
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):
                raise result
            refused[device.name] = _error_line(result, link)
        else:
            out.answers[device.name] = result
    out.unreachable.update((d.name, refused[d.name]) for d in targets if d.name in refused)
    return out


def gather(cfg: settings.Settings, path: str, **kw: Any) -> Answers:
    """``ask_all`` from synchronous code (the CLI)."""
    return asyncio.run(ask_all(cfg, path, **kw))


def listing(cfg: settings.Settings, local: dict[str, Any], *, ask: bool = True
            ) -> dict[str, Any]:
    """``local`` (``views.rows``) merged with every peer's ``/v1/monitors`` (none asked
    when ``ask`` is False: ``list --local``): each row gets ``device``; ``unreachable``
    is ``[{"device", "error"}]``; ``devices`` lists the devices that answered (this one
    first)."""
    got = gather(cfg, "/v1/monitors") if ask else Answers()
    rows = [{**r, "device": cfg.device} for r in local["monitors"]]
    for device, doc in got.answers.items():
        rows.extend({**r, "device": device} for r in doc.get("monitors") or []
                    if isinstance(r, dict))
    rows.sort(key=lambda r: (str(r.get("name")), str(r["device"])))
    return {**local, "monitors": rows, "devices": [cfg.device, *got.answers],
            "unreachable": [{"device": d, "error": e} for d, e in got.unreachable.items()]}


@dataclass(frozen=True, slots=True)
class PeerDuplicates:
    """``add``'s fleet check: ``found`` is ``[(device, monitor name)]`` with the same
    fingerprint; ``unreachable`` device -> error (not consulted)."""

    found: list[tuple[str, str]]
    unreachable: dict[str, str]


def duplicates(cfg: settings.Settings, fingerprint: str, *, name: str) -> PeerDuplicates:
    """Peers that already have a monitor with ``fingerprint`` (other than ``name``)."""
    got = gather(cfg, "/v1/fingerprints")
    found = [(device, str(f.get("name")))
             for device, doc in got.answers.items()
             for f in doc.get("fingerprints") or []
             if isinstance(f, dict) and f.get("fingerprint") == fingerprint
             and f.get("name") != name]
    return PeerDuplicates(found, dict(got.unreachable))


def plan_against(cfg: settings.Settings, device_name: str,
                 desired: list[dict[str, Any]]) -> dict[str, Any]:
    """``POST /v1/plan`` on ``device_name`` with ``desired`` (monitor JSON): its answer
    (``plan``, ``running``).

    Raises:
        errors.UsageError: the device is not in the fleet file or has no address.
        errors.PlanError: the device cannot be reached or refused.
    """
    doc = fleet.load(cfg.fleet_file)
    device = doc.get(device_name)
    if device is None:
        raise errors.UsageError(f"--device {device_name}: no such device in "
                                f"{cfg.fleet_file.name}")
    if not device.address:
        raise errors.UsageError(f"--device {device_name}: it has no address in "
                                f"{cfg.fleet_file.name}")
    got = gather(cfg, "/v1/plan", method="POST", body={"monitors": desired},
                 devices=[device], timeout=max(TIMEOUT, 10.0))
    if device_name in got.unreachable:
        raise errors.PlanError(f"device {device_name} ({device.address}): "
                               f"{got.unreachable[device_name]}")
    return got.answers[device_name]


def plan_for_device(cfg: settings.Settings, device_name: str) -> Any:
    """``plan --device NAME``: this tree's desired set for ``device_name`` (placement as
    that device), planned against that device's running set (``POST /v1/plan``).

    Returns:
        a ``planning.plan.Plan`` (``device`` is ``device_name``).

    Raises:
        errors.UsageError, errors.PlanError: see ``plan_against``.
        errors.ConfigError: the fleet file or settings are unusable.
    """
    import dataclasses

    from reconciler import snapshot, timestamps
    from reconciler.planning import plan as plan_mod
    from reconciler.state import registry as registry_mod

    as_device = dataclasses.replace(cfg, device=device_name)
    snap = snapshot.read(as_device)
    desired = [registry_mod.monitor_to_json(m) for _, m in sorted(snap.desired.monitors.items())]
    answer = plan_against(cfg, device_name, desired)
    try:
        running = {m.name: m for m in (registry_mod.monitor_from_json(d)
                                       for d in answer.get("running") or [])}
        theirs = answer.get("plan") or {}
        generation = int(theirs.get("generation", 0))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise errors.PlanError(f"device {device_name}: malformed plan answer: {e}") from e
    daemon = theirs.get("daemon")
    daemon = daemon if isinstance(daemon, dict) else {}
    basis = plan_mod.Basis(
        device=device_name, daemon_running=True, daemon_pid=daemon.get("pid"),
        generation=generation, digest=snap.digest, commit=snap.commit, dirty=snap.dirty,
        problems=tuple(snap.problems), created_at=timestamps.utc_seconds(), root=cfg.root,
        error_files=tuple(snap.error_files))
    return plan_mod.make(snap.desired, running, basis)
