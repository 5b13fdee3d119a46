"""Git mode's webhook hook: a signed GitHub ``push`` for the followed repository fetches
and reconciles at once (as Flux's Receiver does); a push for another repository does not."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from reconciler.sources import webhook
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, read_json, wait_for
from tests.daemon.gitrepos import commit, git, init, monitor, push_from_elsewhere
from tests.server.conftest import free_port

SECRET = "git-push-secret"


def applied(repo: Repo) -> str | None:
    doc = read_json(repo.state / "running.json") or {}
    return (doc.get("git") or {}).get("lastAppliedRevision")


def push_delivery(url: str, repository: dict[str, Any]) -> httpx.Response:
    body = json.dumps({"ref": "refs/heads/main", "repository": repository}).encode()
    return httpx.post(url + "/hooks/github", content=body, timeout=10, headers={
        "X-GitHub-Event": "push", "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": "sha256=" + webhook.signature(SECRET, body)})


def test_a_push_delivery_for_the_followed_repository_fetches_at_once(
        repo: Repo, tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    origin = tmp_path / "origin.git"
    init(repo, origin=origin, toml='ref = "origin/main"\nfetch = "1h"\n')
    commit(repo, "a", {"monitors.d/a.yml": monitor("a")})
    git(repo.root, "push", "-q", "origin", "main")
    port = free_port()
    d = daemons()
    d.env.update({"MONITORS_HTTP_LISTEN": f"127.0.0.1:{port}",
                  "GITHUB_WEBHOOK_SECRET": SECRET})
    d.start()
    wait_for(lambda: "a" in d.running(), what="a running", log=d.log)
    pushed = push_from_elsewhere(tmp_path, origin, "b")
    url = f"http://127.0.0.1:{port}"
    elsewhere = push_delivery(url, {"full_name": "someone/else",
                                    "clone_url": "https://github.com/someone/else.git"})
    assert elsewhere.status_code == 200
    time.sleep(1.0)
    assert applied(repo) != pushed  # not ours: no fetch (the fetch timer is 1h)
    ours = push_delivery(url, {"full_name": "x/origin", "clone_url": f"file://{origin}"})
    assert ours.status_code == 200, ours.text
    wait_for(lambda: applied(repo) == pushed, what="the pushed commit applied", log=d.log)
    assert "b" in d.running()


def test_repository_names_from_urls() -> None:
    from reconciler.daemon.gitmode import repo_name

    assert repo_name("https://github.com/Owner/Repo.git") == "owner/repo"
    assert repo_name("git@github.com:owner/repo.git") == "owner/repo"
    assert repo_name("ssh://git@github.com/owner/repo") == "owner/repo"
    assert repo_name("/srv/git/owner/repo.git/") == "owner/repo"
    assert repo_name("repo") == ""
