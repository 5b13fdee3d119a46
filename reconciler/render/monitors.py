"""Render the operator views (``list``, ``view``, ``runs``, ``logs``) as text or JSON.

Input is the JSON-ready data of ``daemon.views``; nothing is computed here.
"""

from __future__ import annotations

import json
from typing import Any


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


def listing(data: dict[str, Any]) -> str:
    """``monitors list``: one line per monitor, then the daemon line and file errors."""
    rows = []
    for m in data["monitors"]:
        name = m["name"] + (" [built-in]" if m["builtin"] else "")
        rows.append([name, m["status"], m["source"], m["condition"], m["action"], m["owner"],
                     m["livenessText"]])
    lines = _table(["NAME", "STATUS", "SOURCE", "CONDITION", "ACTION", "OWNER", "LIVENESS"],
                   rows)
    daemon = data["daemon"]
    lines.append("")
    if daemon["running"]:
        lines.append(f"Daemon running on {data['device']} (pid {daemon['pid']}), generation "
                     f"{daemon['generation']}.")
    else:
        lines.append(f"The daemon is not running on {data['device']} (`monitors apply` or "
                     "`monitors run` starts it).")
    for held in daemon.get("held") or []:
        lines.append(f"HELD: {held.get('action')} {held.get('name')}: {held.get('reason')}")
    for problem in data["problems"]:
        lines.append(problem)
    for problem in data.get("storeProblems") or []:
        lines.append(f"state: {problem}")
    return "\n".join(lines) + "\n"


def view(data: dict[str, Any]) -> str:
    """``monitors view NAME``: resolved config, identity, liveness, state, recent fires."""
    cfg = data.get("config") or {}
    lines = [
        f"{data['name']}" + (" [built-in]" if data["builtin"] else ""),
        f"  origin:      {data['origin']} ({data['scope']} layer)",
        f"  fingerprint: {data['fingerprint']}",
        f"  status:      {data['status']}" + (f" ({data['reason']})" if data.get("reason")
                                              else ""),
        f"  owner:       {data['owner']} ({data['placement']})",
        f"  liveness:    {data['livenessText']}",
    ]
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
                lines.append(f"    {k}: {json.dumps(spec[k], ensure_ascii=False)}")
    for key, label in (("rateLimit", "rate limit"), ("labels", "labels"),
                       ("device", "device"), ("devices", "devices")):
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


def fire_line(record: dict[str, Any]) -> str:
    """``<id>  <status>  <event summary>``."""
    event = record.get("event") or {}
    summary = str(event.get("event", "")).replace("\n", " ")
    if len(summary) > 80:
        summary = summary[:77] + "..."
    reason = record.get("reason")
    tail = f"  ({reason})" if reason and record.get("status") != "succeeded" else ""
    return f"{record.get('id', '?')}  {record.get('status', '?')!s:<11} {summary}{tail}"


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
