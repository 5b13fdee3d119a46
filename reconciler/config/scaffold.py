"""``monitors init``: the files of a new monitors repository, written without overwriting.

``files(version)`` is what a new repository holds: an example monitor (with the
schema modeline, and the schemas it points at), ``.gitignore`` naming the state
directory, a ``monitors.toml`` of commented sections, a ``.pre-commit-config.yaml``
running this project's ``monitors-lint`` hook, and a GitHub Actions workflow that
lints (annotations) and then plans. ``write`` creates what is missing, leaves
identical files alone (so a second run changes nothing) and refuses, writing
nothing, when a file exists with other content. The one exception is
``.gitignore``: a missing state-directory line is appended, never anything removed.
No click, no printing: the result is data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from reconciler import errors, settings
from reconciler.config import schemas, writer

GITIGNORE = ".gitignore"
STATE_LINE = f"/{settings.STATE_DIR}/"
EXAMPLE = f"{settings.USER_DIR}/example.yml"
WORKFLOW = ".github/workflows/monitors.yml"
PRE_COMMIT = ".pre-commit-config.yaml"

# The hook of this project's .pre-commit-hooks.yaml (tests/cli/test_init.py keeps them equal),
# run as a local hook from the monitors installed here: no repository URL or rev to pin.
HOOK_ID = "monitors-lint"
HOOK = {
    "id": HOOK_ID,
    "name": "monitors lint",
    "entry": "monitors lint",
    "language": "system",
    "files": r"^((monitors\.d|system)/.*\.ya?ml|monitors\.toml|fleet\.yaml)$",
    "types_or": ["yaml", "toml"],
    "require_serial": True,
}

_EXAMPLE_BODY = """\
# An example monitor: notify (the built-in `log` channel) when monitors.toml changes.
# Check it with `monitors test example`; start it with `monitors apply`. The first
# observation is a silent baseline; an edit to monitors.toml fires.
name: example
description: Tell me when monitors.toml changes
source:
  type: file
  path: monitors.toml      # relative paths start at the repository root
  interval: 30s
action:
  type: notify
  message: 'monitors.toml changed: {{ event }}'
"""

_SETTINGS = """\
# monitors.toml: settings of this repository (README: "monitors.toml"). Every
# section is optional; uncomment what you need.

# device = "laptop"            # this machine's name (default: the host name; --device)
# stateDir = ".history"        # per-machine running state, never committed

# [daemon]
# resync = "60s"               # periodic full reconcile besides file events

# [agents.claude]              # run actions: an argv template, {prompt} as one element
# argv = ["claude", "-p", "{prompt}"]

# [routines.deploy]            # routine actions: a named command
# argv = ["./deploy.sh", "--note", "{prompt}"]
# timeout = "10m"

# [channels.phone]             # notify actions: any Apprise URL, ${NAME} from the environment
# url = "ntfy://ntfy.sh/${NTFY_TOPIC}"

# [owner]
# channels = ["phone", "log"]  # where owner notices go (rate limit, drought)

# [system]                     # built-ins pulled into system/ by `monitors system pull`
# url = "https://github.com/example/monitors-system.git"
# ref = "main"

# [fleet]
# file = "fleet.yaml"          # the devices of the fleet, for placement

# [layers]                     # where monitor files are read (these are the defaults)
# user = "monitors.d"
# system = "system"
# overlays = "monitors.d/overlays"

# [http]                       # the daemon's HTTP API, /metrics, status page
# listen = "127.0.0.1:8765"    # "" turns it off; token: `monitors token create`

# [git]                        # git mode: run what a commit holds, not the working tree
# ref = "origin/main"
# fetch = "1m"

# [etcd]                       # failover owners (owners: [a, b]): leases held in etcd
# endpoints = ["http://127.0.0.1:2379"]
# ttl = "10s"
"""


def _pre_commit() -> str:
    hook = "\n".join(
        f"        {k}: " + ("[" + ", ".join(v) + "]" if isinstance(v, list)
                            else "true" if v is True else str(v))
        for k, v in HOOK.items() if k != "id")
    return f"""\
# pre-commit (https://pre-commit.com): run `pre-commit install` once; then every
# commit that touches a monitor or overlay file, monitors.toml or fleet.yaml is
# linted first. The hook is monitors' own `{HOOK_ID}` (its .pre-commit-hooks.yaml),
# run from the monitors installed here, so hook and CLI are one version.
repos:
  - repo: local
    hooks:
      - id: {HOOK_ID}
{hook}
"""


def _workflow(version: str) -> str:
    return f"""\
# Lint every change (problems become annotations on the pull request), then show
# what a reconcile would do. Written by `monitors init`.
name: monitors
on:
  push:
  pull_request:
jobs:
  lint-and-plan:
    runs-on: ubuntu-latest
    env:
      MONITORS_DEVICE: ci      # the device whose plan to show; set it to one of yours
      NO_COLOR: "1"
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - name: Install monitors
        run: pip install "monitors=={version}"
      - name: Lint
        run: monitors lint --format github
      - name: Plan
        run: monitors plan
"""


def files(version: str) -> dict[str, str]:
    """Relative path -> text of every file ``monitors init`` writes.

    Args:
        version: the monitors release the CI workflow installs (``0.1.0``).
    """
    example_target = Path("/r") / EXAMPLE  # the modeline is relative: any root will do
    modeline = "# yaml-language-server: $schema=" + os.path.relpath(
        f"/r/{writer.REPO_SCHEMAS}/monitor.schema.json", example_target.parent)
    out = {
        EXAMPLE: f"{modeline}\n{_EXAMPLE_BODY}",
        GITIGNORE: f"# per-machine running state of monitors: never committed\n{STATE_LINE}\n",
        settings.SETTINGS_FILE: _SETTINGS,
        PRE_COMMIT: _pre_commit(),
        WORKFLOW: _workflow(version),
    }
    for kind in ("monitor", "overlay"):
        out[f"{writer.REPO_SCHEMAS}/{kind}.schema.json"] = schemas.text(kind)
    return out


@dataclass(slots=True)
class Scaffold:
    """What ``write`` did: paths relative to the root, in ``files`` order."""

    root: Path
    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    appended: list[str] = field(default_factory=list)


def _ignores_state(text: str) -> bool:
    names = {STATE_LINE, STATE_LINE.strip("/"), STATE_LINE.lstrip("/"), STATE_LINE.rstrip("/")}
    return any(line.strip() in names for line in text.splitlines())


def write(root: Path, *, version: str) -> Scaffold:
    """Scaffold a monitors repository at ``root`` (created when missing).

    Raises:
        errors.UsageError: a file exists with other content (all are named; nothing is
            written), or ``root`` is not a directory.
        errors.ConfigError: a file cannot be read or written (the path and the reason).

    New files are created 0644 and new directories 0755 whatever the umask (a stricter
    umask stays stricter): under ``umask 000`` they would be world-writable, and
    monitors refuses such files (``config.trust``).
    """
    if root.exists() and not root.is_dir():
        raise errors.UsageError(f"{root}: not a directory")
    done = Scaffold(root)
    conflicts: list[str] = []
    todo: dict[str, str] = {}
    for rel, text in files(version).items():
        path = root / rel
        try:
            current = path.read_text(encoding="utf-8") if path.exists() else None
        except (OSError, UnicodeDecodeError) as e:
            raise errors.ConfigError(f"{path}: cannot read: {getattr(e, 'strerror', e)}") from e
        if current is None:
            todo[rel] = text
        elif current == text or (rel == GITIGNORE and _ignores_state(current)):
            done.unchanged.append(rel)
        elif rel == GITIGNORE:
            done.appended.append(rel)
            todo[rel] = current + ("\n" if not current.endswith("\n") else "") + f"{STATE_LINE}\n"
        else:
            conflicts.append(rel)
    if conflicts:
        verb = "it differs" if len(conflicts) == 1 else "they differ"
        raise errors.UsageError(
            f"{root}: refusing to overwrite {', '.join(conflicts)} ({verb} from what "
            "`monitors init` writes); nothing written")
    for rel, text in todo.items():
        path = root / rel
        try:
            _create(path, text, append=rel in done.appended)
        except OSError as e:
            raise errors.ConfigError(f"{path}: cannot write: {e.strerror or e}") from e
        if rel not in done.appended:
            done.created.append(rel)
    return done


def _create(path: Path, text: str, *, append: bool) -> None:
    """Write ``text`` at ``path``: replace an existing file's content when ``append``
    (``.gitignore``, its mode kept), else create it 0644 (and its missing directories
    0755), both less the umask's bits. Raises OSError."""
    if append:
        path.write_text(text, encoding="utf-8")
        return
    missing = []
    directory = path.parent
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o755)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
