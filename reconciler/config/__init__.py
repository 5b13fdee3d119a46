"""Configuration: files -> resolved monitors.

Loads the layers (``system/`` shadowed by ``monitors.d/``), validates them
against the JSON Schemas plus semantic checks, applies overlays, fills defaults
and computes fingerprints. Problems are data (``problems.Problem``), collected
across all files. Must not import click or asyncio, and must not print.
"""
