"""Renderers: data -> text for a terminal, JSON or CI annotations, chosen by name.

Renderers never compute, never read files and never print: they return a string.
"""
