"""``monitors mcp``: the monitor tools for coding agents over the Model Context Protocol.

``operations`` does each tool's work on the CLI's own cores (no SDK); ``tools`` names
the tools and their input JSON Schemas; ``server`` wires them to the official ``mcp``
SDK over stdio and audits every call. Only ``cli`` imports this package, and only
``server`` imports the SDK (lazily), so lint and the daemon never load it.
"""
