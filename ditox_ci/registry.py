"""One registry type for everything chosen by name: optimizers, model sources, input generators,
comparators, fuzz generators."""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import TypeVar

from ditox_ci.errors import UsageError

T = TypeVar("T")


class Registry(MutableMapping[str, T]):
    """Entries by name, in the order they were registered; `lookup` of a name not among them
    raises the one error: "unknown <what> '<name>'; known: a, b, c"."""

    def __init__(
        self, what: str, *, error: Callable[[str], BaseException] = UsageError, otherwise: str = ""
    ) -> None:
        """`error` is the exception class a name not registered raises; `otherwise` names what
        else the caller accepts in its place (an import path, a file), appended to the message."""
        self.what = what
        self.error = error
        self.otherwise = otherwise
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """A decorator that registers what it decorates under `name`."""

        def decorate(entry: T) -> T:
            self[name] = entry
            return entry

        return decorate

    def lookup(self, name: str) -> T:
        if name not in self._entries:
            raise self.unknown(name)
        return self._entries[name]

    def unknown(self, name: str) -> BaseException:
        known = ", ".join(sorted(self._entries)) or "none"
        otherwise = f"; or {self.otherwise}" if self.otherwise else ""
        return self.error(f"unknown {self.what} '{name}'; known: {known}{otherwise}")

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __setitem__(self, name: str, entry: T) -> None:
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
