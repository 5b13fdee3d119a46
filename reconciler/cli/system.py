"""``monitors system pull | status``: the pull-only system layer (``config.systempull``).

``pull`` is the only command that writes into ``system/``: it mirrors the
upstream folder at a commit (a force-pushed upstream is followed) and refuses
when ``system/`` was modified locally unless ``--force``. ``status`` shows the
upstream, the pulled commit, behind/ahead counts and local modifications.
"""

from __future__ import annotations

import json
from typing import Any

import click

from reconciler import errors
from reconciler.cli.overlay_cmds import settings_of, shown
from reconciler.config import gitrepo, systempull
from reconciler.config.authoring import overlayedit
from reconciler.settings import Settings


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "-"


def _paused(settings: Settings, name: str) -> bool:
    try:
        return isinstance(overlayedit.current_overlay(settings, name).get("pause"), dict)
    except errors.MonitorsError:
        return False


def _unpulled(base: gitrepo.Baseline | None) -> str:
    """What ``system/`` holds before its first pull, for the ``pulled:`` line."""
    if base is None:
        return ""
    if base.checkout:
        n = len(base.committed)
        return f"; system/ holds {n} file{'s' if n != 1 else ''} committed in this repository"
    n = len(base.modified)
    if not n:
        return ""
    return (f"; system/ holds {n} file{'s' if n != 1 else ''} and this is not a git "
            "checkout: the first pull refuses those that differ from the upstream's "
            "(--force replaces them)")


@click.group("system")
def command() -> None:
    """Manage the pull-only system layer (built-ins mirrored from an upstream git repo).

    The upstream is [system] url, ref and path (default monitors/) in monitors.toml.
    """


@command.command("pull")
@click.option("--from", "url", metavar="URL", help="Upstream repository [default: [system] url].")
@click.option("--ref", metavar="REF", help="Branch, tag or commit [default: [system] ref, "
              "else the upstream's default branch].")
@click.option("--force", is_flag=True, help="Discard local modifications of system/.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def pull(ctx: click.Context, url: str | None, ref: str | None, force: bool,
         as_json: bool) -> int:
    """Make system/ a mirror of the upstream's monitors at REF and record the commit."""
    settings = settings_of(ctx)
    result = systempull.pull(settings, url=url, ref=ref, force=force)
    held = [rel for rel in result.changed if "/" not in rel
            and _paused(settings, rel.rsplit(".", 1)[0])]
    if as_json:
        click.echo(json.dumps({
            "url": result.upstream.url, "ref": result.upstream.ref, "path": result.upstream.path,
            "commit": result.commit, "previous": result.previous, "tree": result.tree,
            "digest": result.digest, "added": result.added, "changed": result.changed,
            "removed": result.removed, "heldByPause": held,
        }, indent=2))
        return errors.ExitCode.OK
    where = f"{result.upstream.url} ({result.upstream.ref or 'default branch'})"
    if result.unchanged:
        click.echo(f"system/ is up to date with {where} at {_short(result.commit)}")
        return errors.ExitCode.OK
    was = f" (was {_short(result.previous)})" if result.previous else ""
    click.echo(f"system/: pulled {where} at {_short(result.commit)}{was}")
    for rel in result.added:
        click.echo(f"  + {rel}")
    for rel in result.changed:
        note = ""
        if rel in held:
            name = rel.rsplit(".", 1)[0]
            note = (f"  (paused by {shown(settings, settings.overlays_dir / (name + '.yml'))}: "
                    "the update is held until `monitors resume " + name + "`)")
        click.echo(f"  ~ {rel}{note}")
    for rel in result.removed:
        click.echo(f"  - {rel}")
    n = len(result.added) + len(result.changed) + len(result.removed)
    click.echo(f"{n} file{'s' if n != 1 else ''} changed; run `monitors plan` to see the effect")
    return errors.ExitCode.OK


@command.command("status")
@click.option("--no-fetch", is_flag=True, help="Do not consult the upstream (offline).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def status(ctx: click.Context, no_fetch: bool, as_json: bool) -> int:
    """Show the upstream, the pulled commit, behind/ahead and local modifications."""
    settings = settings_of(ctx)
    st = systempull.status(settings, fetch_upstream=not no_fetch)
    mods = [shown(settings, p) for p in st.modifications]
    if as_json:
        body: dict[str, Any] = {
            "upstream": None if st.upstream is None else {
                "url": st.upstream.url, "ref": st.upstream.ref, "path": st.upstream.path},
            "commit": st.record.commit if st.record else None,
            "tree": st.record.tree if st.record else None,
            "digest": st.record.digest if st.record else None,
            "pulledAt": st.record.pulled_at if st.record else None,
            "tip": st.tip, "behind": st.behind, "ahead": st.ahead,
            "modifications": mods, "fetchError": st.fetch_error,
            "committedFiles": None if st.baseline is None or not st.baseline.checkout
            else len(st.baseline.committed),
        }
        click.echo(json.dumps(body, indent=2))
        return errors.ExitCode.OK
    if st.upstream is None:
        click.echo("upstream: none (set [system] url in monitors.toml, or "
                   "`monitors system pull --from URL`)")
    else:
        folder = (st.upstream.path + "/") if st.upstream.path else "(root)"
        click.echo(f"upstream: {st.upstream.url} ref {st.upstream.ref or '(default branch)'} "
                   f"folder {folder}")
    if st.record is None:
        click.echo(f"pulled:   never{_unpulled(st.baseline)}")
    else:
        click.echo(f"pulled:   {_short(st.record.commit)} at {st.record.pulled_at} "
                   f"({len(st.record.files)} files, {st.record.digest[:19]})")
    if st.fetch_error and st.upstream is not None:
        click.echo(f"upstream tip: unknown ({st.fetch_error})")
    elif st.tip:
        if st.record is None:
            counts = "not pulled yet (`monitors system pull` mirrors it into system/)"
        elif st.behind is None:
            counts = "recorded commit unknown to the upstream"
        elif st.behind == 0 and st.ahead == 0:
            counts = "up to date"
        else:
            counts = f"{st.behind} behind, {st.ahead} ahead"
            if st.ahead:
                counts += " (the upstream was rewritten: pull follows it)"
        click.echo(f"upstream tip: {_short(st.tip)}: {counts}")
    if mods:
        click.echo("local modifications (system/ is pull-only; move them to monitors.d/ or an "
                   "overlay): " + ", ".join(mods))
    else:
        click.echo("local modifications: none")
    return errors.ExitCode.OK
