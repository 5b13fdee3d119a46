"""The ``notify`` action type: deliver a rendered message to a channel.

All that is known about ``notify`` (README: Actions): its spec and defaults, its
normalization, description, lint check (the channel must be defined), ``test``
preview, crash recovery (at-least-once: re-sent) and ``fire``. Delivery (Apprise,
the ``log`` channel, retries, rate limits) is ``actions.notifier``, imported when a
fire happens: this module imports only leaves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.actions.common import Recovery
from reconciler.actions.options import ActionsConfig
from reconciler.addflags import AddFlag

if TYPE_CHECKING:
    from reconciler.actions.dispatch import Dispatcher
    from reconciler.events import Event
    from reconciler.model import Monitor

TYPE = "notify"
RECOVERY = Recovery.RESEND
TEMPLATES: tuple[str, ...] = ("message",)
FIELDS: tuple[str, ...] = ("channel", "message")
DURATIONS: tuple[str, ...] = ()  # fields holding durations (seconds)
DEFAULT_MESSAGE = "{{ monitor.name }}: {{ event }}"
ADD = AddFlag("--notify", "[CHANNEL]", "Notify the owner (CHANNEL, or the default channels).",
              optional_value=True)


@dataclass(frozen=True, slots=True)
class NotifySpec:
    """A normalized ``notify`` action.

    Attributes:
        channel: a ``[channels]`` name, or None for the owner's default channels.
        message: the Jinja2 message template.
    """

    channel: str | None = None
    message: str = DEFAULT_MESSAGE
    type: str = TYPE

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping the fingerprint hashes (``to_json`` below)."""
        return to_json(self)

    def describe(self) -> str:
        """The one line list/view/plan/test show (``describe`` below)."""
        return describe(self)


def normalize(raw: Mapping[str, Any]) -> NotifySpec:
    """The spec of a schema-valid ``notify`` mapping (or of its ``to_json``)."""
    return NotifySpec(channel=raw.get("channel"), message=raw.get("message", DEFAULT_MESSAGE))


def to_json(spec: NotifySpec) -> dict[str, Any]:
    """The normalized mapping the fingerprint hashes."""
    return {"type": TYPE, "channel": spec.channel, "message": spec.message}


def describe(spec: NotifySpec) -> str:
    """``notify phone`` or ``notify default channels``."""
    return f"{TYPE} {spec.channel or 'default channels'}"


def preview(spec: NotifySpec) -> str:
    """What ``monitors test`` says the action would do."""
    return f"would notify {spec.channel or 'the default channels'}"


def check(action: Mapping[str, Any], config: ActionsConfig | None) -> list[tuple[str, str]]:
    """A named channel must be defined in ``config`` (None: not looked up)."""
    channel = action.get("channel")
    if config is None or not channel or str(channel) in config.channels:
        return []
    known = ", ".join(sorted(config.channels))
    return [("action.channel", f"unknown channel {channel!r} (known: {known})")]


def from_flag(value: str, prompt: str | None) -> dict[str, Any]:
    """The action ``monitors add --notify [CHANNEL]`` writes (``""``: default channels)."""
    return {"type": TYPE, "channel": value or None}


async def fire(d: Dispatcher, monitor: Monitor, event: Event, spec: NotifySpec, *,
               recovered: bool) -> None:
    """Render the message and deliver it, detached; the record ends ``succeeded`` when
    every channel took it. Cut short by shutdown it stays ``dispatched`` (re-sent).

    Raises:
        errors.MonitorsError: the message template does not render.
    """
    from reconciler import timestamps
    from reconciler.actions import templating
    from reconciler.actions.records import FireStatus

    channels = d.notifier.channels_for(spec.channel)
    message = d.redactor.redact(await d.render(
        spec.message or DEFAULT_MESSAGE, templating.context(monitor, event)))
    if spec.message in (None, DEFAULT_MESSAGE) and event.diff:
        message += "\n" + d.redactor.redact(event.diff)  # what changed, as urlwatch reports
    extra: dict[str, Any] = {"recovered": True} if recovered else {}

    async def deliver() -> None:
        await d.update(monitor.name, event.id, status=str(FireStatus.DISPATCHED),
                       action=TYPE, dispatchedAt=timestamps.utc_micro(), channels=list(channels),
                       **extra)
        delivery = await d.notifier.send(channels, monitor=monitor.name, message=message,
                                         event_id=event.id)
        await d.finish(monitor, event,
                       FireStatus.SUCCEEDED if delivery.ok else FireStatus.FAILED,
                       attempts=delivery.attempts, reason=delivery.reason)

    d.spawn(d.delivery(TYPE, monitor, event, deliver()), f"notify:{monitor.name}:{event.id}")
