"""Fingerprint equivalences and differences, through the real loader on real files."""

from __future__ import annotations

from reconciler import settings
from reconciler.config import loader
from reconciler.model import Fingerprint
from tests.conftest import Repo

BASE = """
source:
  type: poll
  command: gh pr checks 1119
  interval: 1m
condition:
  mode: match
  match: fail
action:
  type: run
  agent: claude
  prompt: "CI failed: {{ event }}"
"""


def fp(repo: Repo, text: str, name: str = "m") -> Fingerprint:
    path = repo.write(f"monitors.d/{name}.yml", text)
    result = loader.load(settings.load(root=repo.root), paths=[path])
    assert not result.errors, [p.format() for p in result.problems]
    return result.monitors[name].fingerprint  # type: ignore[index]


EQUIVALENT = {
    "60s instead of 1m": BASE.replace("interval: 1m", "interval: 60s"),
    "integer seconds": BASE.replace("interval: 1m", "interval: 60"),
    "quoted": BASE.replace("interval: 1m", 'interval: "1m"').replace("match: fail",
                                                                     "match: 'fail'"),
    "key order": """
action: {prompt: "CI failed: {{ event }}", agent: claude, type: run}
condition: {match: fail, mode: match}
source: {interval: 1m, command: gh pr checks 1119, type: poll}
""",
    "defaults written out": BASE.replace("  prompt:", "  timeout: 30m\n"
                                         "  overlap: skip\n  prompt:")
    + "",
    "name, description, enabled, placement, labels, rate limit": "name: m\n"
    "description: other\nenabled: false\ndevice: box-2\nsharedInput: true\n"
    "labels: {team: ci}\nrateLimit: {max: 3, per: 1m}\nallowDuplicate: true\n" + BASE,
    "flow style": """
source: {type: poll, command: "gh pr checks 1119", interval: 1m}
condition: {mode: match, match: fail}
action: {type: run, agent: claude, prompt: "CI failed: {{ event }}"}
""",
}

DIFFERENT = {
    "interval": BASE.replace("interval: 1m", "interval: 2m"),
    "command": BASE.replace("1119", "1120"),
    "match": BASE.replace("match: fail", "match: failed"),
    "mode": BASE.replace("  mode: match\n  match: fail\n", "  mode: every\n"),
    "prompt": BASE.replace("CI failed", "CI broke"),
    "cwd: home, not the default repository root": BASE.replace("  prompt:", "  cwd: '~'\n"
                                                               "  prompt:"),
    "agent": BASE.replace("agent: claude", "agent: codex"),
    "timeout explicit non-default": BASE.replace("interval: 1m", "interval: 1m\n  timeout: 5s"),
    "condition ignore": BASE.replace("  match: fail\n", "  match: fail\n  ignore: ['\\d+']\n"),
}


def test_equivalent_spellings_share_a_fingerprint(repo: Repo) -> None:
    base = fp(repo, BASE)
    assert base.startswith("sha256:") and len(base) == 7 + 64
    for label, text in EQUIVALENT.items():
        assert fp(repo, text) == base, label


def test_behaviour_changes_change_the_fingerprint(repo: Repo) -> None:
    base = fp(repo, BASE)
    seen = {base}
    for label, text in DIFFERENT.items():
        value = fp(repo, text)
        assert value not in seen, label
        seen.add(value)


def test_implicit_condition_equals_explicit_on_change(repo: Repo) -> None:
    text = "source: {type: file, path: /etc/hostname}\naction: {type: notify}\n"
    explicit = text + "condition: {mode: on-change}\n"
    assert fp(repo, text) == fp(repo, explicit)


def test_fingerprint_is_the_documented_function() -> None:
    from reconciler.config import fingerprint

    a = fingerprint.compute({"type": "file", "x": 1}, {"mode": "every"}, {"type": "notify"})
    b = fingerprint.compute({"x": 1, "type": "file"}, {"mode": "every"}, {"type": "notify"})
    assert a == b
    assert fingerprint.canonical({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()
