"""The client side of the daemon: what the CLI uses to talk to it and to read its state.

``control`` sends control requests and starts the daemon; ``handover`` plans and
hands an apply to the daemon; ``stopper`` stops it; ``views`` reads the state
directory for list/view/runs/logs. Nothing here runs in the daemon process, and
nothing here imports the daemon's internals: only the control protocol
(``daemon.protocol``) and the start report (``daemon.startreport``). No click.
"""
