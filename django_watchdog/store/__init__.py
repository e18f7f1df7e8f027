"""The only code that writes watchdog rows: ``Store(using)`` and its verbs, one module per
group of verbs, and one dialect module per database (``store.dialects``).

``from django_watchdog.store import Store, Partition`` works once Django's app registry is
ready (the store imports the models); importing a store submodule before then does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .claims import Partition
    from .store import Store

__all__ = ["Partition", "Store"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
