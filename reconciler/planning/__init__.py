"""Planning: the desired set for this device versus the running registry -> a Plan.

Pure functions returning data: placement (who owns a monitor), the diff against
running state and the plan. No I/O here, no click, no asyncio: the CLI and the
daemon load files and state, call in, and act on what comes back.
"""
