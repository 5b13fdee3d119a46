"""``monitors run [--once] [--resync 60s] [--allow-mass-stop] [--demo] [--log-level info]
[--log-format text|json]``: the daemon, foreground (SIGHUP re-reads monitors.toml).

Exit codes: 0 after SIGTERM/SIGINT (a clean stop) or after ``--once``; 2 when
another daemon holds the state directory (the message names its pid); 1 for
unusable configuration.
"""

from __future__ import annotations

import os

import click

from reconciler import errors
from reconciler.cli import params
from reconciler.daemon import logformat


@click.command("run")
@click.option("--once", is_flag=True,
              help="One reconcile and one poll of every owned monitor, wait for the fires "
              "it caused to be dispatched, then exit (cron, CI smoke tests).")
@click.option("--wait", default="30s", show_default=True, type=params.DURATION,
              metavar="DURATION",
              help="With --once: how long to wait for polls and then for dispatches.")
@click.option("--resync", default=None, type=params.DURATION,
              metavar="DURATION",
              help="Time between periodic resyncs, e.g. 60s or 5m [default: monitors.toml "
              "daemon.resync, else 60s].")
@click.option("--debounce", default="50ms", show_default=True, type=params.DURATION,
              metavar="DURATION",
              help="Quiet time after a file event before reconciling (a burst of events is "
              "applied at the latest 2s after the first one).")
@click.option("--allow-mass-stop", is_flag=True,
              help="Never hold stops for the mass-stop guard.")
@click.option("--demo", is_flag=True,
              help="Also rewrite <repository root>/.history/demo/tick.txt every 15s, "
              "whatever --state-dir says (a demo input, git-ignored), so the shipped "
              "monitors.d/demo-file.yml has something to see (make run).")
@click.option("--log-level", type=click.Choice(logformat.LEVELS), default="info",
              show_default=True, help="The lowest level logged.")
@click.option("--log-format", type=click.Choice(logformat.FORMATS), default="text",
              show_default=True,
              help="text: 'HH:MM:SS level message'; json: one JSON object a line (time, "
              "level, logger, message).")
@click.pass_context
def command(ctx: click.Context, once: bool, wait: float, resync: float | None,
            debounce: float, allow_mass_stop: bool, demo: bool, log_level: str,
            log_format: str) -> int:
    """Run the reconciler daemon in the foreground (Ctrl-C stops it cleanly)."""
    from reconciler.daemon import options as daemon_options

    if once:  # before the daemon's modules load: they are most of what it allocates
        daemon_options.one_shot_gc()
    else:
        daemon_options.favour_event_loop()
    from reconciler.daemon import main as daemon_main
    from reconciler.daemon import startreport

    report = startreport.StartReport.from_env()
    try:
        cfg = ctx.find_root().obj.settings()
        daemon_options.setup_logging(timestamps=bool(os.environ.get("MONITORS_LOG_TIMESTAMPS")),
                                  level=log_level, fmt=log_format)
        options = daemon_options.Options(
            once=once, once_wait=wait or daemon_options.DEFAULT_ONCE_WAIT,
            resync=resync if resync is not None else daemon_options.resync_seconds(cfg),
            debounce=debounce if debounce is not None else 0.05,
            allow_mass_stop=allow_mass_stop, resync_fixed=resync is not None)
        daemon = daemon_main.Daemon(cfg, options)
        if demo and not once:
            from reconciler.daemon import demo as demo_mod

            daemon.also("demo", lambda: demo_mod.tick(cfg.root))
        if not once:
            _serve_http(daemon, cfg)
        def ready() -> None:
            if not once:
                daemon_options.settle_heap()
            report.ready()

        daemon.on_ready = ready
        rc = daemon.run()
    except errors.MonitorsError as e:
        report.failed(str(e))  # `apply` relays it, even when daemon.log cannot take it
        raise
    finally:
        report.ready()
    return errors.ExitCode(rc)


def _serve_http(daemon: object, cfg: object) -> None:
    """Attach the HTTP server (``server.app``) unless ``[http] listen`` is ``""``.

    Raises:
        errors.ConfigError: ``[http]`` is invalid or the token file is refused.
    """
    from reconciler import tokens
    from reconciler.daemon.main import Daemon
    from reconciler.server import app, options
    from reconciler.settings import Settings

    assert isinstance(daemon, Daemon) and isinstance(cfg, Settings)
    http = options.load(cfg)
    if http.enabled:
        daemon.serve(app.HttpServer(daemon, http, tokens.read(cfg)))
