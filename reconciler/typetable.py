"""A registry's table of types whose modules are imported on first use.

The source and action registries map a YAML ``type`` string to the module that
implements it. Importing every type module up front made each command pay for all
of them at start-up (frozen slotted dataclasses compile their methods when the
class is created: about 0.5 ms a class), so ``monitors lint`` of a repository
using two types imported eight. A ``TypeTable`` knows every key and its module's
name from the start (iteration, ``in`` and ``len`` import nothing) and imports a
module the first time its entry is read; reading every value (``.values()``,
``.items()``) imports them all. A leaf: stdlib only.
"""

from __future__ import annotations

import importlib
from collections.abc import Container, Iterator, Mapping
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class TypeTable(Mapping[str, T], Generic[T]):
    """``type key -> module`` in declaration order, each module imported when first read.

    Args:
        package: the package holding the modules (``"reconciler.sources"``).
        modules: type key -> module name inside ``package``, in display order
            (``{"poll-http": "http", ...}``).

    ``table[key]`` raises ``KeyError`` for an unknown key and whatever the import
    raises for a broken module (a bug, never swallowed).
    """

    def __init__(self, package: str, modules: Mapping[str, str]) -> None:
        self._package = package
        self._names = dict(modules)
        self._loaded: dict[str, T] = {}

    def __getitem__(self, key: str) -> T:
        found = self._loaded.get(key)
        if found is None:
            name = self._names[key]
            found = cast(T, importlib.import_module(f"{self._package}.{name}"))
            self._loaded[key] = found
        return found

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def module_name(self, key: str) -> str:
        """The full dotted name of ``key``'s module, without importing it."""
        return f"{self._package}.{self._names[key]}"

    def flagged(self, attribute: str) -> Container[str]:
        """The keys whose module sets ``attribute`` to a true value (``STREAM``, ``PUSH``),
        as a container: ``key in found`` imports only ``key``'s module."""
        return _Flagged(self, attribute)

    def loaded(self) -> list[str]:
        """The keys whose modules this table has imported so far."""
        return [key for key in self._names if key in self._loaded]


class _Flagged(Container[str]):
    """``TypeTable.flagged``: membership reads one module's flag (unknown keys: False)."""

    def __init__(self, table: Mapping[str, object], attribute: str) -> None:
        self._table = table
        self._attribute = attribute

    def __contains__(self, key: object) -> bool:
        return (isinstance(key, str) and key in self._table
                and bool(getattr(self._table[key], self._attribute, False)))
