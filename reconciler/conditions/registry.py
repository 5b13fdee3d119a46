"""The condition modes, keyed by the YAML ``condition.mode`` string (STYLE.md habit 7).

Every caller that depends on the mode goes through ``MODES``/``mode_of``: decide,
describe (list/view/plan/test), lint's checks and ``monitors add``'s flags. Adding a
mode is its module here, its ``model.ConditionMode`` value, its schema enum entry, its
tests and its README row.
Imports only the mode modules (pure, no runtime dependencies), each the first time
its entry of ``MODES`` is read (``typetable``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from reconciler import errors
from reconciler.addflags import AddFlag
from reconciler.conditions import spec
from reconciler.conditions.spec import Condition
from reconciler.findings import Finding
from reconciler.model import ConditionMode, Monitor, Observation
from reconciler.typetable import TypeTable

if TYPE_CHECKING:
    from reconciler.conditions.decision import Decision


class Mode(Protocol):
    """What a mode module provides (``on_change``, ``match``, ``every``)."""

    MODE: ConditionMode
    QUIET: str

    def describe(self, spec: Condition) -> str: ...

    def check(self, raw: Mapping[str, Any]) -> list[Finding]: ...

    @property
    def ADD(self) -> AddFlag: ...

    def from_flag(self, value: Any, /) -> dict[str, Any]:
        """The ``condition`` mapping ``monitors add`` writes (raises ``UsageError``)."""
        ...

    def decide(self, monitor: Monitor, observation: Observation,
               previous: Mapping[str, Any] | None) -> Decision: ...


MODES: TypeTable[Mode] = TypeTable("reconciler.conditions", {
    "on-change": "on_change", "match": "match", "every": "every",
})
"""YAML ``mode`` string -> its module (imported when first read), in README order; each
module's ``MODE`` is its key (tests/conditions/test_modes.py)."""


def mode_of(condition: Condition) -> Mode:
    """The module of ``condition.mode``."""
    return MODES[condition.mode]  # a StrEnum: hashes as its string


def describe(condition: Condition) -> str:
    """The one-line description list, view, plan and test show (``match /fail/``)."""
    return mode_of(condition).describe(condition)


def quiet(condition: Condition) -> str:
    """What the liveness view says of a monitor that never fired (``no match yet``)."""
    return mode_of(condition).QUIET


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """Lint's semantic findings for a ``condition`` mapping (schema-valid or not): the
    regexes every mode shares, then the mode's own checks (an unknown mode has none:
    the schema reports it)."""
    out = spec.check_regexes(raw) + spec.check_thresholds(raw)
    mode = MODES.get(str(raw.get("mode", spec.DEFAULT_MODE.value)))
    if mode is not None:
        out.extend(mode.check(raw))
    return out


def add_flags() -> list[AddFlag]:
    """The ``monitors add`` condition flags: one per mode (``MODES`` order), then the
    shared ``--dedupe-key``."""
    return [m.ADD for m in MODES.values()] + [spec.DEDUPE_KEY]


def from_flags(given: Mapping[str, Any], *, source_type: str) -> dict[str, Any] | None:
    """The ``condition`` mapping ``monitors add`` writes, or None for the default.

    Args:
        given: flag ``dest`` -> its value (None or False: not given), for the flags of
            ``add_flags``.
        source_type: the source's type: the mode is left implicit when it is the
            default and the source's default condition is the plain default (not for
            ``pid``, whose default fires on exit).

    Raises:
        errors.UsageError: more than one mode flag, or a regex that does not compile.
    """
    modes = [m for m in MODES.values() if given.get(m.ADD.dest) not in (None, False)]
    if len(modes) > 1:
        raise errors.UsageError(
            f"add: give at most one condition; got {', '.join(m.ADD.flag for m in modes)}")
    cond = modes[0].from_flag(given[modes[0].ADD.dest]) if modes else {}
    dedupe = given.get(spec.DEDUPE_KEY.dest)
    if dedupe is not None:
        cond["dedupeKey"] = spec.regex_flag(dedupe, spec.DEDUPE_KEY.flag)
    if (cond.get("mode") == spec.DEFAULT_MODE
            and spec.normalize(None, source_type=source_type) == spec.Condition()):
        del cond["mode"]  # the default, left implicit
    return cond or None
