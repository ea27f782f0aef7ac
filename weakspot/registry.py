"""A registry of named implementations with a ``register`` decorator.

Caveat first: names are case-sensitive, and registering a name twice is an error, so two plug-ins
cannot silently shadow each other.

Example
-------
>>> SEARCHES = Registry("search")
>>> @SEARCHES.register("random")
... class RandomSearch: ...
>>> SEARCHES.get("random").__name__
'RandomSearch'
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, TypeVar

from weakspot.errors import ConfigError

T = TypeVar("T")


class Registry:
    """A dict of name -> object whose failed look-up lists the valid names."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: Dict[str, Any] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items:
                raise ConfigError(f"{self.kind} {name!r} is already registered")
            self._items[name] = obj
            return obj

        return deco

    def get(self, name: str) -> Any:
        try:
            return self._items[name]
        except KeyError:
            valid = ", ".join(sorted(self._items)) or "(none)"
            raise ConfigError(f"unknown {self.kind} {name!r}; valid names: {valid}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))
