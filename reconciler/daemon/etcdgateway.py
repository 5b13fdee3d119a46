"""A small asyncio client for etcd's v3 JSON gateway (``/v3/...``), over httpx.

Only what failover owners need (``daemon.leases``): lease grant, keepalive and
revoke, and one transaction (``/v3/kv/txn``) with compares, puts and ranges. The
gateway speaks the v3 API's protobuf messages as JSON (etcd docs, "gRPC gateway"):
keys and values are base64, 64-bit integers are decimal strings, fields at their
default value (0, false, empty) are left out of answers.

Why the gateway and not a gRPC client: ``etcd3`` is unmaintained and pins old
protobuf releases; ``aetcd`` is asyncio but brings grpcio and protobuf. httpx is
already a dependency, asyncio-native, and the gateway is served on every etcd
client URL since 3.3.

``[etcd]`` of monitors.toml (``Options.load``): ``endpoints`` (tried in order; the
first that answers is kept), ``prefix`` (default ``/monitors/``), ``ttl`` (a
duration, default 10s, at least 2s), ``caFile``/``certFile``/``keyFile`` (TLS,
relative to the repository root), ``username``/``password`` (etcd auth: a token from
``/v3/auth/authenticate`` sent as ``Authorization``; ``${NAME}`` expands from the
environment and the password is registered with the redactor).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler import durations, errors, redaction, settings

if TYPE_CHECKING:
    import httpx

DEFAULT_PREFIX = "/monitors/"
DEFAULT_TTL = 10.0
MIN_TTL = 2.0
TIMEOUT = 2.0  # seconds per request: a lease is only as good as its keepalives


class EtcdError(Exception):
    """etcd did not answer, or answered with an error (the message says which)."""

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code

    @property
    def lease_lost(self) -> bool:
        """The request named a lease that no longer exists (it expired or was revoked)."""
        return "lease not found" in str(self)


@dataclass(frozen=True, slots=True)
class Options:
    """``[etcd]`` of monitors.toml (see the module docstring).

    Attributes:
        endpoints: client URLs, tried in order.
        prefix: the key prefix, ending in ``/``.
        ttl: the lease TTL in seconds.
        ca_file, cert_file, key_file: TLS files, or None.
        username, password: etcd auth, or None.
    """

    endpoints: tuple[str, ...]
    prefix: str = DEFAULT_PREFIX
    ttl: float = DEFAULT_TTL
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @classmethod
    def load(cls, cfg: settings.Settings, *, environ: Mapping[str, str] | None = None,
             redactor: redaction.Redactor | None = None) -> Options | None:
        """The ``[etcd]`` options of ``cfg``, or None when monitors.toml has no ``[etcd]``.

        Raises:
            errors.ConfigError: ``ttl`` does not parse or is under 2s, ``certFile`` and
                ``keyFile`` are not both set, or a ``${NAME}`` is not set.
        """
        section = cfg.section("etcd")
        if not section:
            return None
        env = os.environ if environ is None else environ
        try:
            ttl = durations.parse(section.get("ttl", "10s"))
        except ValueError as e:
            raise errors.ConfigError(f"monitors.toml: etcd.ttl: {e}") from e
        if ttl < MIN_TTL:
            raise errors.ConfigError(f"monitors.toml: etcd.ttl: {ttl:g}s is under the "
                                     f"{MIN_TTL:g}s a lease needs")
        cert, key = section.get("certFile"), section.get("keyFile")
        if bool(cert) != bool(key):
            raise errors.ConfigError("monitors.toml: etcd: certFile and keyFile go together")
        prefix = str(section.get("prefix", DEFAULT_PREFIX))

        def path(value: Any) -> Path | None:
            return cfg.root / str(value) if value else None

        def secret(value: Any) -> str | None:
            if value is None:
                return None
            try:
                return redaction.expand(str(value), environ=env, redactor=redactor)
            except redaction.Unset as e:
                raise errors.ConfigError(f"monitors.toml: etcd: {e}") from e

        password = secret(section.get("password"))
        if password and redactor is not None:
            redactor.add(password)  # a literal password is a secret too
        return cls(endpoints=tuple(str(e).rstrip("/") for e in section["endpoints"]),
                   prefix=prefix if prefix.endswith("/") else prefix + "/", ttl=ttl,
                   ca_file=path(section.get("caFile")), cert_file=path(cert),
                   key_file=path(key), username=secret(section.get("username")),
                   password=password)


def b64(text: str | bytes) -> str:
    """``text`` (UTF-8) as the gateway's base64."""
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode("ascii")


def unb64(text: str | None) -> str:
    """The gateway's base64 back to text ("" for a missing field)."""
    return base64.b64decode(text or "").decode()


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key as a range answer gives it.

    Attributes:
        key, value: decoded text.
        create_revision: the revision that created the key (the fencing token).
        lease: the lease the key is attached to (0: none).
    """

    key: str
    value: str
    create_revision: int
    lease: int

    @classmethod
    def from_json(cls, kv: Mapping[str, Any]) -> KeyValue:
        """Decode one ``kvs`` item of a range answer."""
        return cls(unb64(kv.get("key")), unb64(kv.get("value")),
                   int(kv.get("create_revision") or 0), int(kv.get("lease") or 0))


@dataclass(frozen=True, slots=True)
class TxnResult:
    """A transaction's answer: which branch ran, its revision, and its range answers.

    Attributes:
        succeeded: every compare held (the ``success`` branch ran).
        revision: the store's revision after the transaction.
        ranges: per request of the branch that ran, the keys a range found (empty
            for a put).
    """

    succeeded: bool
    revision: int
    ranges: tuple[tuple[KeyValue, ...], ...]


def compare_created(key: str, revision: int) -> dict[str, Any]:
    """A compare: ``key``'s create revision equals ``revision`` (0: the key is absent)."""
    return {"key": b64(key), "target": "CREATE", "result": "EQUAL",
            "create_revision": str(revision)}


def put(key: str, value: str, *, lease: int = 0) -> dict[str, Any]:
    """A put request of a transaction (attached to ``lease`` when non-zero)."""
    request: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease:
        request["lease"] = str(lease)
    return {"request_put": request}


def get(key: str) -> dict[str, Any]:
    """A range request of one key."""
    return {"request_range": {"key": b64(key)}}


def delete(key: str) -> dict[str, Any]:
    """A delete request of one key."""
    return {"request_delete_range": {"key": b64(key)}}


class Gateway:
    """An etcd cluster through its JSON gateway (see the module docstring).

    Every method is one HTTP request (``round_trips`` counts them, for the bench);
    each raises ``EtcdError`` when no endpoint answers or etcd refuses the request.
    """

    def __init__(self, options: Options) -> None:
        self.options = options
        self.round_trips = 0
        self._client: httpx.AsyncClient | None = None
        self._token: str | None = None
        self._current = 0  # index of the endpoint that answered last

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            opts = self.options
            verify: ssl.SSLContext | bool = True
            if opts.ca_file is not None or opts.cert_file is not None:
                verify = ssl.create_default_context(
                    cafile=str(opts.ca_file) if opts.ca_file else None)
                if opts.cert_file is not None and opts.key_file is not None:
                    verify.load_cert_chain(str(opts.cert_file), str(opts.key_file))
            self._client = httpx.AsyncClient(timeout=TIMEOUT, verify=verify, trust_env=False)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def call(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``/v3/<path>`` on the first endpoint that answers.

        Raises:
            EtcdError: every endpoint failed (connection, timeout), or etcd answered
                an error (its message; an auth error drops the token for the next call).
        """
        import httpx

        endpoints = self.options.endpoints
        last: Exception | None = None
        for i in range(len(endpoints)):
            at = (self._current + i) % len(endpoints)
            try:
                headers = await self._auth(endpoints[at])
                self.round_trips += 1
                answer = await self._http().post(f"{endpoints[at]}/v3/{path}",
                                                 content=json.dumps(body), headers=headers)
            except httpx.HTTPError as e:
                last = e
                continue
            self._current = at
            return self._decode(answer)
        raise EtcdError(f"etcd unreachable ({', '.join(endpoints)}): "
                        f"{type(last).__name__}: {last}")

    def _decode(self, answer: httpx.Response) -> dict[str, Any]:
        try:
            data = answer.json()
        except ValueError as e:
            raise EtcdError(f"etcd answered HTTP {answer.status_code} without JSON") from e
        if not isinstance(data, dict):
            raise EtcdError(f"etcd answered HTTP {answer.status_code}: {str(data)[:200]}")
        if answer.status_code != 200 or "error" in data:
            message = str(data.get("message") or data.get("error") or answer.status_code)
            if "token" in message or "auth" in message:
                self._token = None
            raise EtcdError(f"etcd: {message}", code=int(data.get("code") or 0))
        result = data.get("result")
        return result if isinstance(result, dict) else data

    async def _auth(self, endpoint: str) -> dict[str, str]:
        opts = self.options
        if opts.username is None:
            return {}
        if self._token is None:
            self.round_trips += 1
            answer = await self._http().post(
                f"{endpoint}/v3/auth/authenticate",
                content=json.dumps({"name": opts.username, "password": opts.password or ""}))
            self._token = str(self._decode(answer).get("token") or "")
        return {"Authorization": self._token}

    async def grant(self, ttl: float) -> int:
        """Grant a lease of ``ttl`` seconds (rounded up); return its id."""
        data = await self.call("lease/grant", {"TTL": str(max(1, round(ttl + 0.49)))})
        return int(data["ID"])

    async def keepalive(self, lease: int) -> float:
        """Renew ``lease`` once; return its remaining TTL in seconds (0: it is gone)."""
        data = await self.call("lease/keepalive", {"ID": str(lease)})
        return float(data.get("TTL") or 0)

    async def revoke(self, lease: int) -> None:
        """Revoke ``lease``: every key attached to it is deleted at once."""
        await self.call("lease/revoke", {"ID": str(lease)})

    async def txn(self, compare: Sequence[Mapping[str, Any]],
                  success: Sequence[Mapping[str, Any]],
                  failure: Sequence[Mapping[str, Any]] = ()) -> TxnResult:
        """One transaction: if every ``compare`` holds run ``success``, else ``failure``
        (requests from ``put``/``get``/``delete``), atomically."""
        data = await self.call("kv/txn", {"compare": list(compare), "success": list(success),
                                          "failure": list(failure)})
        ranges = tuple(
            tuple(KeyValue.from_json(kv) for kv in
                  (r.get("response_range") or {}).get("kvs") or ())
            for r in data.get("responses") or ())
        return TxnResult(bool(data.get("succeeded")),
                         int((data.get("header") or {}).get("revision") or 0), ranges)
