"""The shared redactor (``reconciler.redaction``): what counts as a secret and how it is masked."""

from __future__ import annotations

import io
import logging

import pytest

from reconciler import redaction
from reconciler.model import Observation
from reconciler.redaction import MASK, Redactor
from tests.factories import monitor


def test_every_occurrence_is_masked() -> None:
    r = Redactor(["s3cr3t-value"])
    assert r.redact("a s3cr3t-value b s3cr3t-value!") == "a *** b ***!"
    assert r.redact("s3cr3t-values3cr3t-value") == "***"  # adjacent: one mask


@pytest.mark.parametrize("value", ["", "a", "abc", "   ", " ab "])
def test_short_and_empty_values_are_never_registered(value: str) -> None:
    r = Redactor([value])
    assert r.secrets == ()
    assert r.redact("a b abc ab") == "a b abc ab"


def test_surrounding_whitespace_registers_the_stripped_value_too() -> None:
    r = Redactor(["tok-123456\n"])
    assert r.redact("got tok-123456 here") == "got *** here"


def test_overlapping_secrets_leave_no_part_of_either() -> None:
    # "abcdef" then "defghi" overlap: replacing one first would leave the other's tail.
    r = Redactor(["abcdef", "defghi"])
    assert r.redact("x abcdefghi y") == "x *** y"
    # a secret inside a longer one: the longer one is masked whole
    r = Redactor(["token", "my-token-value"])
    assert r.redact("my-token-value token") == "*** ***"


def test_a_secret_repeating_inside_itself_is_masked_whole() -> None:
    assert Redactor(["abab"]).redact("xababab") == "x***"


def test_cut_text_masks_edge_fragments_of_at_least_min_secret_chars() -> None:
    r = Redactor(["s3cr3t-value"])
    # the cap kept the first half only / a tail kept the second half only
    assert r.redact("output ends s3cr3t-", cut=True) == "output ends ***"
    assert r.redact("3t-value and more", cut=True) == "*** and more"
    # shorter fragments are not secret material enough to shred text for
    assert r.redact("ends s3c", cut=True) == "ends s3c"
    # not cut: an edge that happens to look like a fragment stays
    assert r.redact("output ends s3cr3t-") == "output ends s3cr3t-"


def test_values_nested_in_json_are_masked_keys_included() -> None:
    r = Redactor(["s3cr3t-value"])
    value = {"a": ["x s3cr3t-value", 3, None], "s3cr3t-value": {"b": "s3cr3t-value"}}
    assert r.redact_value(value) == {"a": ["x ***", 3, None], "***": {"b": "***"}}


def test_observation_text_and_meta_are_redacted() -> None:
    r = Redactor(["s3cr3t-value"])
    obs = Observation("a s3cr3t-", {"truncated": True, "stderrTail": "r3t-value\nboom",
                                    "exitCode": 0})
    out = r.observation(obs)
    assert out.text == "a ***"
    assert out.meta == {"truncated": True, "stderrTail": "***\nboom", "exitCode": 0}
    # nothing registered: the very same object (no copy per poll)
    assert Redactor().observation(obs) is obs


def test_expand_registers_what_it_substitutes() -> None:
    r = Redactor()
    env = {"TOK": "abcdef", "SHORT": "ab"}
    assert redaction.expand("Bearer ${TOK} ${SHORT}", environ=env, redactor=r) == \
        "Bearer abcdef ab"
    assert r.secrets == ("abcdef",)
    with pytest.raises(redaction.Unset, match="environment variable NOPE is not set"):
        redaction.expand("${NOPE}", environ=env)


def test_collect_finds_every_reference_of_monitors_and_settings() -> None:
    monitors = [
        monitor({"type": "poll", "command": "echo ${SHELL_TOK} ${HOME} ${XDG_X} $BARE",
                 "interval": "1m", "env": {"X": "${SRC_ENV}"}},
                action={"type": "webhook-out", "url": "https://h/${URL_TOK}",
                        "headers": {"A": "Bearer ${HDR}"}, "secretEnv": "SIGNING"}),
        monitor({"type": "poll-http", "url": "http://h/", "interval": "1m",
                 "headers": {"B": "${HTTP_HDR}"}},
                action={"type": "run", "agent": "x", "env": {"GH": "${GH_TOKEN}"},
                        "prompt": "${NOT_OURS_EITHER}"}),
        monitor({"type": "webhook", "provider": "github", "events": ["push"],
                 "secretEnv": "HOOK_SECRET"}),
    ]
    toml = {"agents": {"a": {"argv": ["a"], "env": {"K": "${AGENT_KEY}"}}},
            "routines": {"r": {"argv": ["r"], "env": {"D": "x-${DEPLOY}"}}},
            "channels": {"phone": {"url": "ntfy://ntfy.sh/${TOPIC}"}}}
    names = ["SRC_ENV", "URL_TOK", "HDR", "SIGNING", "HTTP_HDR", "GH_TOKEN", "HOOK_SECRET",
             "AGENT_KEY", "DEPLOY", "SHELL_TOK", "TOPIC", "HOME", "XDG_X", "BARE",
             "NOT_OURS_EITHER"]
    environ = {n: f"value-of-{n}" for n in names}
    environ["TOPIC"] = ""  # set but empty: nothing to register
    got = set(redaction.collect(monitors, toml, environ))
    # a shell command's ${SHELL_TOK} is the shell's expansion of a secret: registered;
    # ${HOME} and XDG_* hold no secret; the bare $BARE form and a prompt are not references
    assert got == {f"value-of-{n}" for n in names[:-5]}


def test_log_filter_redacts_message_arguments_and_traceback() -> None:
    r = Redactor(["s3cr3t-value"])
    stream = io.StringIO()
    logger = logging.getLogger("monitors.test-redaction")
    handler = logging.StreamHandler(stream)
    handler.addFilter(redaction.LogFilter(r))
    logger.addHandler(handler)
    try:
        logger.warning("first poll failed: %s", "stderr: s3cr3t-value")
        try:
            raise RuntimeError("boom s3cr3t-value")
        except RuntimeError:
            logger.exception("poll raised")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "s3cr3t" not in text
    assert "first poll failed: stderr: ***" in text
    assert "RuntimeError: boom ***" in text


def test_a_secret_registered_after_the_filter_is_still_masked() -> None:
    r = Redactor()
    record = logging.LogRecord("monitors", logging.INFO, __file__, 1, "x %s", ("later-secret",),
                               None)
    r.add("later-secret")
    redaction.LogFilter(r).filter(record)
    assert record.getMessage() == f"x {MASK}"


def test_filter_logs_covers_library_loggers_through_the_last_resort_handler(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Libraries (asyncio: "Task exception was never retrieved") log to their own loggers:
    # with no handler configured Python writes WARNING and above to stderr (the daemon
    # log) through logging.lastResort.
    stream = io.StringIO()
    last = logging.StreamHandler(stream)
    monkeypatch.setattr(logging, "lastResort", last)
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    redaction.filter_logs(Redactor(["ntfy-topic-secret"]))
    logging.getLogger("some_library.module").warning("failed to send to ntfy://ntfy-topic-secret")
    assert stream.getvalue() == "failed to send to ntfy://***\n"
