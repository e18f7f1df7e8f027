"""Async twins of sync verbs, in Django's manner: ``a``-prefixed, one implementation."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from asgiref.sync import sync_to_async


def async_twin[**P, R](verb: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """``verb`` for async code: the same call, run by ``sync_to_async(thread_sensitive=True)``.

    Thread-sensitive, as Django's async ORM methods are: the call runs in the thread that
    owns the request's (or test's) database connection, so it joins that connection's
    transaction handling instead of opening a connection of its own.
    """

    async def twin(*args: P.args, **kwargs: P.kwargs) -> R:
        return await sync_to_async(verb, thread_sensitive=True)(*args, **kwargs)

    twin.__name__ = twin.__qualname__ = f"a{verb.__name__}"
    twin.__module__ = verb.__module__
    twin.__doc__ = f"The async twin of ``{verb.__name__}()``: same arguments, same result."
    return twin
