"""A monitor's identity: the fingerprint over what it watches, decides and does."""

from __future__ import annotations

import hashlib

from reconciler.atomic import canonical
from reconciler.model import Fingerprint, Spec

__all__ = ["canonical", "compute"]


def compute(source: Spec, condition: Spec, action: Spec) -> Fingerprint:
    """Return ``"sha256:" + hex`` over the canonical JSON of the three normalized specs.

    What goes in: the *normalized* ``source``, ``condition`` and ``action``
    (``config.normalize``: defaults filled, durations as float seconds), as the
    JSON object ``{"source": ..., "condition": ..., "action": ...}``. So ``60s``
    and ``1m``, key order, quoting and defaults written out or left implicit do
    not change it.

    What stays out: ``name``, ``description``, ``enabled``, pause, placement
    (``device``, ``devices``, ``sharedInput``), ``rateLimit``, ``labels`` and
    ``allowDuplicate``: two monitors that differ only there are one trigger
    (placement is who executes, not what runs).
    """
    body = canonical({"source": source, "condition": condition, "action": action})
    return Fingerprint("sha256:" + hashlib.sha256(body).hexdigest())
