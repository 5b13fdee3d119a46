"""The system layer's record and local state: what ``system/`` should hold and what it holds.

The record (``RECORD_FILE``, ``system/.upstream.json``, JSON, ``version: 1``) holds
the upstream URL, ref, folder, commit, the folder's git tree id, a sha256 ``digest``
over the file list, and a sha256 per file. It lives inside ``system/`` on purpose: it
travels with the layer it describes (commit it with the layer) and it is the one file
there that is not a monitor; the loader skips dot-files and non-YAML files.

``system_modifications`` compares ``system/`` with the record: a changed, added or
deleted file is a local modification (lint reports them as errors, rule
``system-modified``; ``pull`` refuses them unless forced). Without a record (never
pulled) lint reports nothing, since nothing records what the files should be.
``upstream`` says where built-ins come from (``[system]`` of ``monitors.toml``, else
the record).

Must not: run git (``gitrepo``) or change ``system/`` (``systempull``); no click, no
printing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import errors
from reconciler.config import writer
from reconciler.settings import Settings

RECORD_FILE = ".upstream.json"
RECORD_VERSION = 1
DEFAULT_PATH = "monitors/"


@dataclass(frozen=True, slots=True)
class Upstream:
    """Where built-ins come from.

    Attributes:
        url: any URL or path git can fetch (``https://``, ``file://``, a path).
        ref: a branch, tag or commit id; None for the upstream's default branch.
        path: the folder inside the upstream holding the monitors (``""`` = root).
    """

    url: str
    ref: str | None
    path: str


@dataclass(frozen=True, slots=True)
class Record:
    """What the last ``system pull`` wrote (``system/.upstream.json``).

    Attributes:
        files: path relative to ``system/`` (POSIX) -> ``sha256:<hex>`` of its bytes.
        digest: ``sha256:<hex>`` over the sorted ``"<sha> <path>\\n"`` lines of ``files``.
        pulled_at: aware ISO-8601 UTC time of the pull.
    """

    url: str
    ref: str | None
    path: str
    commit: str
    tree: str
    digest: str
    files: dict[str, str]
    pulled_at: str


def sha256_bytes(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_digest(files: dict[str, str]) -> str:
    """The tree digest: sha256 over sorted ``"<sha> <path>\\n"`` lines."""
    body = "".join(f"{files[p]} {p}\n" for p in sorted(files))
    return sha256_bytes(body.encode())


# -- upstream configuration and record ---------------------------------------------------


def record_path(settings: Settings) -> Path:
    """``system/.upstream.json``."""
    return settings.system_dir / RECORD_FILE


def read_record(settings: Settings) -> Record | None:
    """The last pull's record, or None when there is none.

    Raises:
        errors.ConfigError: the record exists but is unreadable or malformed
            (the message says to run ``monitors system pull --force``).
    """
    path = record_path(settings)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict) or raw.get("version") != RECORD_VERSION:
            raise ValueError(f"unknown record version {raw.get('version')!r}")
        return Record(
            url=str(raw["url"]), ref=raw.get("ref"), path=str(raw.get("path", "")),
            commit=str(raw["commit"]), tree=str(raw.get("tree", "")),
            digest=str(raw["digest"]), files={str(k): str(v) for k, v in raw["files"].items()},
            pulled_at=str(raw.get("pulledAt", "")),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise errors.ConfigError(
            f"{path}: unreadable system-layer record ({e}); run `monitors system pull "
            "--force` to restore system/ from its upstream"
        ) from e


def write_record(settings: Settings, record: Record) -> None:
    """Write ``record`` as ``system/.upstream.json`` (atomically)."""
    body = {
        "version": RECORD_VERSION,
        "comment": "written by `monitors system pull`; do not edit",
        "url": record.url, "ref": record.ref, "path": record.path, "commit": record.commit,
        "tree": record.tree, "digest": record.digest, "pulledAt": record.pulled_at,
        "files": dict(sorted(record.files.items())),
    }
    writer.atomic_write(record_path(settings), json.dumps(body, indent=2) + "\n")


def upstream(settings: Settings, *, url: str | None = None, ref: str | None = None) -> Upstream:
    """The upstream to pull: ``--from``/``--ref`` over ``[system]`` of ``monitors.toml``,
    else the last pulled upstream.

    Raises:
        errors.ConfigError: no URL anywhere (the message says where to set one).
    """
    section = settings.section("system")
    record = None
    with contextlib.suppress(errors.ConfigError):
        record = read_record(settings)
    chosen_url = url or section.get("url") or (record.url if record else None)
    if not chosen_url:
        raise errors.ConfigError(
            "system pull: no upstream; set [system] url in monitors.toml or pass --from URL"
        )
    if ref is None:
        ref = section.get("ref") or (record.ref if record and not url else None)
    path = str(section.get("path", DEFAULT_PATH)).strip().strip("/")
    if path == ".":
        path = ""
    return Upstream(url=str(chosen_url), ref=str(ref) if ref else None, path=path)


# -- local state of system/ ---------------------------------------------------------------


def local_files(system_dir: Path) -> Iterator[str]:
    """The regular files under ``system_dir`` (relative, POSIX, sorted by directory),
    the record, symlinks and ``.git`` left out."""
    if not system_dir.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(system_dir):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            full = Path(dirpath) / name
            rel = full.relative_to(system_dir).as_posix()
            if rel == RECORD_FILE or full.is_symlink() or not full.is_file():
                continue
            yield rel


def local_manifest(settings: Settings) -> dict[str, str]:
    """Every file under ``system/`` (record excluded) -> ``sha256:<hex>``."""
    return {rel: sha256_bytes((settings.system_dir / rel).read_bytes())
            for rel in local_files(settings.system_dir)}


def diff(expected: dict[str, str], actual: dict[str, str]) -> list[str]:
    """Paths whose hash differs between two manifests, or that only ``expected`` has (sorted)."""
    return sorted(
        [p for p, h in actual.items() if expected.get(p) != h]
        + [p for p in expected if p not in actual]
    )


def system_modifications(settings: Settings) -> list[Path]:
    """Files of ``system/`` that differ from the recorded pulled tree.

    A changed or added file, and a recorded file that was deleted, are each
    one entry (absolute path, sorted). Empty when ``system/`` was never pulled.

    Raises:
        errors.ConfigError: the record is malformed.
    """
    record = read_record(settings)
    if record is None:
        return []
    return [settings.system_dir / p for p in diff(record.files, local_manifest(settings))]


def modification_problems(settings: Settings, *, cwd: Path | None = None) -> list[Any]:
    """``system_modifications`` as lint errors (rule ``system-modified``), one per file,
    ``file:1:1: error: ...``; a malformed record is one error on the record itself.

    Returns:
        ``problems.Problem`` values (file shown relative to ``cwd`` when below it).
    """
    from reconciler.config import problems as P

    base = (cwd or Path.cwd()).resolve()

    def display(path: Path) -> str:
        try:
            return str(path.resolve().relative_to(base))
        except ValueError:
            return str(path)

    try:
        modified = system_modifications(settings)
    except errors.ConfigError as e:
        return [P.error(display(record_path(settings)), 1, 1, "", str(e).split(": ", 1)[-1],
                        "system-modified")]
    out = []
    for path in modified:
        what = "changed or added" if path.exists() else "deleted"
        out.append(P.error(display(path), 1, 1, "",
                           f"{what} in the pull-only system layer since the last `monitors "
                           "system pull`: move the change to monitors.d/ (a user copy shadows "
                           "a built-in) or an overlay (monitors pause/pin); `monitors system "
                           "pull --force` restores the upstream version", "system-modified"))
    return out
