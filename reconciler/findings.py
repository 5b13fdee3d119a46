"""Position-free lint findings: what a type module's ``check`` returns.

A leaf (imports only ``model``): type modules (sources, conditions, actions) report
their semantic problems as ``Finding`` values naming a JSON path inside the monitor
document; ``config.semantic`` maps each path to ``file:line:col`` and makes it a
``Problem``. Nothing here knows files or positions.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.model import Severity


@dataclass(frozen=True, slots=True)
class Finding:
    """One semantic problem of one field.

    Attributes:
        path: the field's JSON path in the monitor document
            (``("condition", "ignore", 0)``).
        message: one line saying what is wrong (and what to do).
        rule: the lint rule id (README's rule table), e.g. ``bad-regex``.
        severity: error, warning or info.
    """

    path: tuple[str | int, ...]
    message: str
    rule: str
    severity: Severity = Severity.ERROR
