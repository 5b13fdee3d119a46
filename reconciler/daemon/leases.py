"""Failover owners: one etcd lease per daemon, one holder key per ``owners:`` monitor,
and fencing before every fire (README, "Failover owners").

The model is Kubernetes' leader election on a consensus store (controller-runtime's
Lease), with the fencing token of Kleppmann's "How to do distributed locking":

* The daemon keeps one lease (``[etcd] ttl``, keepalive every third of it). Losing it
  (a keepalive answers TTL 0, or none succeeded for a whole TTL) drops every seat.
* Each ``owners:`` monitor has a holder key ``<prefix><name>/holder`` (value: the
  device) created only if absent, attached to the lease, in one transaction. The
  key's create revision is the **fencing token**: a later holder's key is a later
  creation, so its token differs.
* The state that decides a fire (the condition state: baseline, fired signatures,
  episode, last event) lives at ``<prefix><name>/state``, written by ``commit`` in the
  transaction that checks the holder key still has the token. A holder that was
  stopped (SIGSTOP) or cut off past its TTL comes back to a failed compare: it does
  not fire, records why, and stands by. A new holder starts from that state
  (``Admission.state``), so a change during the hand-over fires once and nothing
  fired before fires again.
* A contention loop retries the seats this device stands by for every
  ``retry`` seconds, so a revoked or expired key is taken within that time.
* ``close`` (SIGTERM) revokes the lease: the holder keys go at once.
* etcd unreachable: no admission, no commit, so ``owners:`` monitors fire nowhere;
  ``snapshot`` and the metrics say so.

Round trips: one transaction per poll (``admit``: contend or confirm, and read the
state) and one per persisted decision (``commit``), plus the keepalives.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler import redaction, settings
from reconciler.daemon import etcdgateway as gw
from reconciler.daemon import metrics

log = logging.getLogger("monitors.leases")

NO_ETCD = "no [etcd] in monitors.toml: owners monitors run nowhere"


class Fenced(Exception):
    """The fencing check failed (or could not be made): the fire must not happen."""


@dataclass(slots=True)
class Seat:
    """This device's view of one ``owners:`` monitor's holder key.

    Attributes:
        holder: the device holding the key, or None (no holder, or unknown).
        token: this device's fencing token while it holds the key, else None.
        fresh: the token was taken since the last admission (load the etcd state).
        error: why the seat could not be checked (etcd unreachable), or None.
        fenced: the last fencing refusal (one line), or None.
        admitted: monotonic seconds of the last ``admit``.
    """

    holder: str | None = None
    token: int | None = None
    fresh: bool = False
    error: str | None = None
    fenced: str | None = None
    admitted: float = 0.0

    @property
    def role(self) -> str:
        """``holder``, ``standby`` or ``unreachable`` (etcd could not be asked)."""
        if self.error is not None:
            return "unreachable"
        return "holder" if self.token is not None else "standby"


@dataclass(frozen=True, slots=True)
class Admission:
    """``admit``'s answer: whether this device polls now, and from which state.

    Attributes:
        run: this device holds the key: poll and decide.
        token: the fencing token when ``run``.
        state: the condition state stored in etcd, given when this device just took
            the key (continue from it), else None.
        reason: why not, when not ``run`` (``standby (holder: a)``).
    """

    run: bool
    token: int | None = None
    state: Mapping[str, Any] | None = None
    reason: str = ""


class Owners:
    """The leases and seats of one daemon (see the module docstring).

    Args:
        gateway: the etcd client.
        device: this device's name (the holder key's value).
        monotonic: seconds for lease expiry bookkeeping (injectable for tests).
        retry: seconds between contention attempts for standby seats (default: a
            quarter second, at most an eighth of the TTL).
    """

    def __init__(self, gateway: gw.Gateway, *, device: str,
                 monotonic: Callable[[], float] = time.monotonic,
                 retry: float | None = None) -> None:
        self.gateway = gateway
        self.device = device
        self.ttl = gateway.options.ttl
        self.prefix = gateway.options.prefix
        self.retry = retry if retry is not None else min(0.25, self.ttl / 8)
        self.monotonic = monotonic
        self.lease: int | None = None
        self.error: str | None = None
        self.seats: dict[str, Seat] = {}
        self.fences = 0  # fires refused by the fencing check
        self._renewed = 0.0  # monotonic time of the last grant or keepalive
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    # -- keys ----------------------------------------------------------------

    def holder_key(self, name: str) -> str:
        """``<prefix><name>/holder``."""
        return f"{self.prefix}{name}/holder"

    def state_key(self, name: str) -> str:
        """``<prefix><name>/state``."""
        return f"{self.prefix}{name}/state"

    # -- the lease -------------------------------------------------------------

    async def _ensure_lease(self) -> int:
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="etcd-lease")
        if self._closed:
            raise gw.EtcdError("the daemon is stopping: no new lease")
        async with self._lock:
            if self.lease is not None and self.monotonic() - self._renewed >= self.ttl:
                self._lost("no keepalive succeeded for a whole TTL")
            if self.lease is None:
                self.lease = await self.gateway.grant(self.ttl)
                self._renewed = self.monotonic()
                log.info("etcd lease %x granted (ttl %gs)", self.lease, self.ttl)
            return self.lease

    def _lost(self, why: str) -> None:
        if self.lease is not None:
            log.warning("etcd lease %x lost: %s; standing by everywhere", self.lease, why)
        self.lease = None
        for name, seat in self.seats.items():
            seat.token = None
            metrics.holding(name, False)

    async def _run(self) -> None:
        """Keepalive every third of the TTL and contend for standby seats every
        ``retry``, side by side (a slow contention never delays a keepalive)."""
        await asyncio.gather(self._keepalives(), self._contention())

    async def _keepalives(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.ttl / 3)
            if self.lease is not None:
                await self._keepalive(self.lease)

    async def _contention(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.retry)
            for name, seat in list(self.seats.items()):  # release() drops stopped ones
                if seat.token is None:
                    with contextlib.suppress(gw.EtcdError):
                        await self._contend(name, seat, read_state=False)
                    if seat.token is not None and self.seats.get(name) is not seat:
                        await self._drop(name, seat.token)  # released meanwhile

    async def _keepalive(self, lease: int) -> None:
        try:
            left = await self.gateway.keepalive(lease)
        except gw.EtcdError as e:
            self.error = str(e)
            metrics.etcd_reachable(False)
            if self.monotonic() - self._renewed >= self.ttl:
                self._lost("no keepalive succeeded for a whole TTL")
            return
        self.error = None
        metrics.etcd_reachable(True)
        if left <= 0:
            self._lost("etcd says it expired")
        else:
            self._renewed = self.monotonic()

    async def close(self) -> None:
        """Revoke the lease (a standby takes every held key at once) and stop."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self.lease is not None:
            try:
                await self.gateway.revoke(self.lease)
                log.info("etcd lease %x revoked", self.lease)
            except gw.EtcdError as e:
                log.warning("cannot revoke the etcd lease: %s (it expires in %gs)",
                            e, self.ttl)
            self._lost("revoked")
        await self.gateway.aclose()

    # -- seats -----------------------------------------------------------------

    async def _contend(self, name: str, seat: Seat, *, read_state: bool
                       ) -> Mapping[str, Any] | None:
        """One transaction: create the holder key if absent (attached to the lease),
        else read it; with ``read_state`` read the state key too. Updates ``seat``;
        returns the stored state when read and present."""
        for attempt in (1, 2):
            lease = await self._ensure_lease()
            key = self.holder_key(name)
            reads = [gw.get(self.state_key(name))] if read_state else []
            try:
                result = await self.gateway.txn([gw.compare_created(key, 0)],
                                                [gw.put(key, self.device, lease=lease), *reads],
                                                [gw.get(key), *reads])
            except gw.EtcdError as e:
                if e.lease_lost and attempt == 1 and self.lease == lease:
                    self._lost("etcd no longer knows it")
                    continue
                seat.error = str(e)
                seat.token = None
                metrics.etcd_reachable(False)
                metrics.holding(name, False)
                raise
            break
        seat.error = None
        if result.succeeded:
            seat.holder, seat.token, seat.fresh = self.device, result.revision, True
            log.info("%s: took the holder key (fencing token %d)", name, result.revision)
        else:
            found = result.ranges[0][0] if result.ranges and result.ranges[0] else None
            if found is not None and found.lease == lease:
                if seat.token != found.create_revision:
                    seat.fresh = True
                seat.holder, seat.token = self.device, found.create_revision
            else:
                seat.holder, seat.token = (found.value if found else None), None
        metrics.etcd_reachable(True)
        metrics.holding(name, seat.token is not None)
        states = result.ranges[-1] if read_state and result.ranges else ()
        if not states:
            return None
        try:
            stored = json.loads(states[0].value)
        except ValueError:
            stored = None
        if not isinstance(stored, dict):
            log.warning("%s: the state in etcd is not a JSON object; starting from the "
                        "local state", name)
            return None
        return stored

    async def admit(self, name: str) -> Admission:
        """Before a poll of ``name``: contend for (or confirm) its holder key.

        Returns:
            ``Admission(run=True, token, state)`` when this device holds the key
            (``state``: etcd's condition state when the key was just taken), else
            ``run=False`` with the reason (``standby (holder: a)``, or etcd's error).
        """
        seat = self.seats.setdefault(name, Seat())
        seat.admitted = self.monotonic()
        try:
            state = await self._contend(name, seat, read_state=True)
        except gw.EtcdError as e:
            return Admission(False, reason=f"standby: {e}")
        if seat.token is None:
            return Admission(False, reason=f"standby (holder: {seat.holder or 'none'})")
        fresh, seat.fresh = seat.fresh, False
        return Admission(True, seat.token, state if fresh else None)

    async def commit(self, name: str, state: Mapping[str, Any], *, token: int) -> None:
        """The fencing check and the state write, in one transaction: if the holder
        key still has create revision ``token``, store ``state`` beside it.

        Raises:
            Fenced: the key is gone or is another holder's (the seat stands by), or
                etcd could not be asked; the reason is the message.
        """
        seat = self.seats.setdefault(name, Seat())
        key = self.holder_key(name)
        body = json.dumps({**state, "fencingToken": token, "holder": self.device},
                          sort_keys=True)
        try:
            result = await self.gateway.txn([gw.compare_created(key, token)],
                                            [gw.put(self.state_key(name), body)],
                                            [gw.get(key)])
        except gw.EtcdError as e:
            seat.error, seat.token = str(e), None
            metrics.holding(name, False)
            self.fences += 1
            seat.fenced = f"not fired: the fencing check could not be made: {e}"
            raise Fenced(seat.fenced) from e
        if result.succeeded:
            seat.fenced = None
            return
        found = result.ranges[0][0] if result.ranges and result.ranges[0] else None
        seat.token, seat.holder = None, found.value if found else None
        metrics.holding(name, False)
        self.fences += 1
        now = (f"{found.value} holds it with token {found.create_revision}" if found
               else "no device holds it")
        seat.fenced = f"not fired: fencing token {token} is stale ({now}); standing by"
        raise Fenced(seat.fenced)

    async def release(self, name: str) -> None:
        """This device stops running ``name`` (removed, replaced, no longer listed):
        delete its holder key if it is still this device's (same token), so a listed
        device takes it now rather than when this daemon's lease ends. Never raises."""
        seat = self.seats.pop(name, None)
        if seat is None or seat.token is None or self._closed:
            return
        metrics.holding(name, False)
        await self._drop(name, seat.token)

    async def _drop(self, name: str, token: int) -> None:
        key = self.holder_key(name)
        try:
            await self.gateway.txn([gw.compare_created(key, token)], [gw.delete(key)])
        except gw.EtcdError as e:
            log.warning("%s: cannot release the holder key: %s (it goes with the lease)",
                        name, e)

    def snapshot(self) -> dict[str, Any]:
        """For status, list and metrics: ``{"etcd": {"up", "error", "lease"},
        "monitors": {name: {"role", "holder", "token", "fenced", "error"}}}``."""
        down = self.error or next((s.error for s in self.seats.values() if s.error), None)
        return {
            "etcd": {"up": down is None, "error": down,
                     "lease": None if self.lease is None else f"{self.lease:x}",
                     "fenced": self.fences},
            "monitors": {name: {"role": s.role, "holder": s.holder, "token": s.token,
                                "fenced": s.fenced, "error": s.error}
                         for name, s in sorted(self.seats.items())},
        }


def build(cfg: settings.Settings, *, redactor: redaction.Redactor | None = None
          ) -> Owners | None:
    """The daemon's ``Owners`` for ``[etcd]`` of ``cfg``, or None without ``[etcd]``.

    Raises:
        errors.ConfigError: ``[etcd]`` is invalid (``etcdgateway.Options.load``).
    """
    options = gw.Options.load(cfg, redactor=redactor)
    if options is None:
        return None
    return Owners(gw.Gateway(options), device=cfg.device)
