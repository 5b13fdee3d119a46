"""Render the operator views (``list``, ``view``, ``runs``, ``logs``) as text or JSON.

Input is the JSON-ready data of ``client.views``; nothing is computed here.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

from reconciler import durations
from reconciler.conditions import diff

DURATION_KEYS = frozenset({"interval", "timeout", "backoff", "maxTime"})
"""Normalized spec keys holding seconds; shown as ``10s``/``5m`` in text (JSON keeps seconds)."""

SOURCE_WIDTH = 48
MIN_SOURCE_WIDTH = 24
ACTION_WIDTH = 18
NAME_WIDTH = 32

_SPEC_SECONDS = DURATION_KEYS | {"per"}  # ``_spec_value``: rateLimit.per is seconds too


def as_json(data: Any) -> str:
    """Indented JSON with a trailing newline."""
    return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return lines


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with ``…``; a trailing ``every 30s`` is kept."""
    if len(text) <= width:
        return text
    head, sep, every = text.rpartition(" every ")
    tail = f"{sep}{every}" if sep and len(every) <= 6 else ""
    body = head if tail else text
    return body[: max(1, width - len(tail) - 1)] + "…" + tail


def _wrap(text: str, width: int, indent: str) -> list[str]:
    """``text`` split at `` · `` into lines of at most ``width`` (a long part is cut)."""
    lines: list[str] = []
    current = ""
    for part in text.split(" · "):
        candidate = f"{current} · {part}" if current else part
        if len(indent) + len(candidate) <= width or not current:
            current = candidate
        else:
            lines.append(current)
            current = part
    if current:
        lines.append(current)
    return [fit(indent + line, width) for line in lines]


def listing(data: dict[str, Any], *, wide: bool = False, width: int | None = None) -> str:
    """``monitors list``: the monitors, then the daemon line and file errors.

    Default (fits 80-100 columns, like ``kubectl get``): one line per monitor with
    NAME, STATUS, SOURCE (cut with ``…``) and ACTION, its liveness (and owner when
    it is another device) indented on the next line. ``wide`` (``kubectl get -o
    wide``): one full line per monitor with CONDITION, OWNER, GENERATION (the file's
    content hash, ``config.generation``) and LIVENESS too.
    ``width`` (default: the terminal's, at least 80) bounds the liveness lines.
    """
    # a fleet listing (client.fleet.listing) with another device in it: a DEVICE column
    fleet = len(data.get("devices") or ()) > 1 or bool(data.get("unreachable"))
    if wide:
        rows = []
        for m in data["monitors"]:
            name = m["name"] + (" [built-in]" if m["builtin"] else "")
            rows.append([*([m["device"]] if fleet else []), name, m["status"], m["source"],
                         m["condition"], m["action"], m["owner"],
                         m.get("generation") or "-", m["livenessText"]])
        lines = _table([*(["DEVICE"] if fleet else []), "NAME", "STATUS", "SOURCE",
                        "CONDITION", "ACTION", "OWNER", "GENERATION", "LIVENESS"], rows)
    else:
        width = width or max(80, shutil.get_terminal_size((100, 24)).columns)
        names = [fit(m["name"] + (" [built-in]" if m["builtin"] else ""), NAME_WIDTH)
                 for m in data["monitors"]]
        actions = [fit(m["action"], ACTION_WIDTH) for m in data["monitors"]]
        used = max([4, *map(len, names)]) + max([6, *(len(m["status"]) for m in
                                                        data["monitors"])]) \
            + max([6, *map(len, actions)]) + 6
        source_width = max(MIN_SOURCE_WIDTH, min(SOURCE_WIDTH, width - used))
        rows = [[*([m["device"]] if fleet else []), name, m["status"],
                 fit(m["source"], source_width), action]
                for name, action, m in zip(names, actions, data["monitors"], strict=True)]
        table = _table([*(["DEVICE"] if fleet else []), "NAME", "STATUS", "SOURCE", "ACTION"],
                       rows)
        lines = [table[0]]
        for m, line in zip(data["monitors"], table[1:], strict=True):
            lines.append(line)
            detail = m["livenessText"]
            if m["owner"].startswith(("holder:", "standby")):
                detail += f" · {m['owner']}"
            elif m["owner"] not in ("this device", "-", ""):
                detail += f" · owner {m['owner']}"
            lines.extend(_wrap(detail, width, "    "))
    daemon = data["daemon"]
    lines.append("")
    if daemon["running"]:
        lines.append(f"Daemon running on {daemon.get('device') or data['device']} "
                     f"(pid {daemon['pid']}), generation {daemon['generation']}.")
        if daemon.get("settingsMismatch"):
            lines.append(f"warning: {daemon['settingsMismatch']}")
    else:
        lines.append(f"The daemon is not running on {data['device']} (`monitors apply` or "
                     "`monitors run` starts it).")
    lines.extend(git_lines(daemon.get("git")))
    etcd = (daemon.get("owners") or {}).get("etcd") or {}
    if etcd and not etcd.get("up"):
        lines.append(f"ETCD DOWN: owners monitors fire nowhere until it is back: "
                     f"{etcd.get('error')}")
    for held in daemon.get("held") or []:
        lines.append(f"HELD: {held.get('action')} {held.get('name')}: {held.get('reason')}")
    for problem in data["problems"]:
        lines.append(problem)
    for problem in data.get("storeProblems") or []:
        lines.append(f"state: {problem}")
    if fleet:
        lines.append(f"Fleet: {len(data['devices'])} device(s) answered: "
                     f"{', '.join(data['devices'])}.")
        for peer in data.get("unreachable") or []:
            lines.append(f"UNREACHABLE {peer['device']}: {peer['error']}")
        if data.get("unreachable"):
            lines.append("incomplete: the monitors of the unreachable devices are not listed "
                         "(exit 4)")
    return "\n".join(lines) + "\n"


def git_lines(git: dict[str, Any] | None) -> list[str]:
    """Git mode's header lines (``protocol.GitRevisions``): ``Following origin/main:
    applied 1a2b3c4d5e6f (last attempted 9f8e7d6c5b4a).`` and the error, if any;
    nothing in local mode."""
    if not git:
        return []
    applied = (git.get("lastAppliedRevision") or "")[:12] or "no commit yet"
    attempted = (git.get("lastAttemptedRevision") or "")[:12]
    line = f"Following {git.get('ref')}: applied {applied}"
    if attempted and attempted != applied:
        line += f" (last attempted {attempted})"
    lines = [line + "."]
    if git.get("error"):
        lines.append(f"git error: {git['error']}")
    return lines


def status(data: dict[str, Any]) -> str:
    """``monitors status``: one line for the daemon, git mode's lines, the problems."""
    if data["running"]:
        lines = [f"Daemon running on {data['device']} (pid {data['pid']}), generation "
                 f"{data['generation']}, {len(data['monitors'])} monitors running."]
        last = data.get("lastReconcile") or {}
        if last.get("at"):
            lines.append(f"Last reconcile {last['at']} ({last.get('trigger') or 'request'}): "
                         f"{last.get('summary')}")
    else:
        lines = [f"The daemon is not running on {data['device']}; it last ran "
                 f"{len(data['monitors'])} monitors (generation {data['generation']})."]
    lines.extend(git_lines(data.get("git")))
    lines.extend(data.get("problems") or [])
    return "\n".join(lines) + "\n"


def view(data: dict[str, Any]) -> str:
    """``monitors view NAME``: resolved config, identity, liveness, state, recent fires."""
    cfg = data.get("config") or {}
    lines = [
        f"{data['name']}" + (" [built-in]" if data["builtin"] else ""),
        f"  origin:      {data['origin']} ({data['scope']} layer)",
        f"  fingerprint: {data['fingerprint']}",
        *([f"  generation:  {data['generation']} (of the file's content)"]
          if data.get("generation") else []),
        *([f"  revision:    {data['revision']}"] if data.get("revision") else []),
        f"  status:      {data['status']}" + (f" ({data['reason']})" if data.get("reason")
                                              else ""),
        f"  owner:       {data['owner']} ({data['placement']})",
        f"  liveness:    {data['livenessText']}",
    ]
    if data.get("stopped"):
        stop = data["stopped"]
        lines.append(f"  stopped:     {stop.get('reason')} ({stop.get('action')} "
                     f"{stop.get('at')} by {stop.get('by')})")
    if cfg.get("description"):
        lines.append(f"  description: {cfg['description']}")
    if data.get("error"):
        lines.append(f"  file error:  {data['error']}")
    running = data.get("running")
    applied = data.get("lastApplied")
    if running:
        lines.append(f"  running:     since {running['startedAt']} (generation "
                     f"{running['generation']})")
    elif applied:
        lines.append(f"  last applied: {applied['startedAt']} (generation "
                     f"{applied['generation']}; the daemon is not running)")
    for key in ("source", "condition", "action"):
        spec = cfg.get(key) or {}
        lines.append(f"  {key}:")
        for k in sorted(spec):
            if spec[k] not in (None, {}, []):
                lines.append(f"    {k}: {_spec_value(k, spec[k])}")
    rate = cfg.get("rateLimit")
    if rate:
        lines.append(f"  rate limit: {rate.get('max')} per {_spec_value('per', rate.get('per'))}")
    for key, label in (("labels", "labels"), ("device", "device"), ("devices", "devices")):
        if cfg.get(key):
            lines.append(f"  {label}: {json.dumps(cfg[key])}")
    state = data.get("state")
    if state:
        lines.append("  state:")
        for k in ("baseline", "lastSignature", "matching", "lastFiredAt", "updatedAt"):
            if k in state:
                value = json.dumps(state[k], ensure_ascii=False)
                lines.append(f"    {k}: {value if len(value) < 100 else value[:97] + '...'}")
    fires = data.get("recentFires") or []
    lines.append(f"  recent fires ({len(fires)}):" if fires else "  recent fires: none")
    for record in fires:
        lines.append("    " + fire_line(record))
    return "\n".join(lines) + "\n"


def _spec_value(key: str, value: Any) -> str:
    """A spec value for text: durations as ``10s`` (``durations.format``), else JSON."""
    if key in _SPEC_SECONDS and isinstance(value, int | float) \
            and not isinstance(value, bool):
        return durations.format(float(value))
    return json.dumps(value, ensure_ascii=False)


def fire_line(record: dict[str, Any]) -> str:
    """``<id>  <status>  <event summary>``, then the first changed line of the event's
    diff when it has one (``    +the line``)."""
    event = record.get("event") or {}
    summary = str(event.get("event", "")).replace("\n", " ")
    if len(summary) > 80:
        summary = summary[:77] + "..."
    reason = record.get("reason")
    tail = f"  ({reason})" if reason and record.get("status") != "succeeded" else ""
    line = f"{record.get('id', '?')}  {record.get('status', '?')!s:<11} {summary}{tail}"
    change = diff.first_change(str(event.get("diff") or ""))
    if change:
        line += "\n    " + (change if len(change) <= 100 else change[:97] + "...")
    return line


def runs(name: str, records: list[dict[str, Any]]) -> str:
    """``monitors runs NAME``: the fire history, newest first."""
    if not records:
        return f"{name}: no fires yet\n"
    return "\n".join(fire_line(r) for r in records) + "\n"


def logs(name: str, items: list[dict[str, Any]]) -> str:
    """``monitors logs NAME``: the action output of the latest fires."""
    if not items:
        return f"{name}: no fires yet\n"
    out = []
    for item in items:
        out.append(f"== {item['id']} ({item['status']}) ==")
        for key, value in (item.get("details") or {}).items():
            out.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
        if item["output"] is None:
            out.append("(no output file)")
        else:
            out.append(item["output"].rstrip("\n"))
    return "\n".join(out) + "\n"
