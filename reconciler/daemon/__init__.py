"""The daemon: evaluators, the scheduler, supervision, file watching and control.

``evaluator.Engine`` turns running monitors into polls (observe, decide, persist,
dispatch) on one heap-ordered ``scheduler.Scheduler``. The rest of the package
(supervisor, watch, control, main) keeps the running set equal to the desired
set. Nothing here parses YAML or renders output; nothing here uses click.
"""
