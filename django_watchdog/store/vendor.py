"""Where SQLite and PostgreSQL differ: row locks, the queue lock and wake-up notifications."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections
from django.utils import timezone

from ..conf import setting


def is_postgres(using: str) -> bool:
    return connections[using].vendor == "postgresql"


def execute(using: str, sql: str, params: Sequence[Any] = ()) -> int:
    """Run one statement; return its row count."""
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def fetch(using: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


LOCK_QUEUE = "SELECT 1 FROM watchdog_queue WHERE name = %s FOR UPDATE"
CREATE_QUEUE = (
    "INSERT INTO watchdog_queue (name, created_at) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING"
)


def lock_queue(using: str, queue: str, *, create: bool = False) -> None:
    """Serialise every change to ``queue`` until this transaction ends.

    On PostgreSQL this is the queue row's lock; on SQLite the write transaction already
    excludes every other writer, so only the row's existence matters.
    """
    if not is_postgres(using):
        if create:
            execute(using, CREATE_QUEUE, (queue, timezone.now()))
        return
    if fetch(using, LOCK_QUEUE, (queue,)):
        return
    if create:
        execute(using, CREATE_QUEUE, (queue, timezone.now()))
        fetch(using, LOCK_QUEUE, (queue,))


def lock_queues(using: str, queues: Sequence[str]) -> None:
    """Lock several queues in one order, so two multi-queue changes cannot deadlock."""
    for queue in sorted(set(queues)):
        lock_queue(using, queue)


def notify(using: str, lane: str) -> None:
    """Wake idle workers of ``lane`` once this transaction commits (PostgreSQL only)."""
    if is_postgres(using):
        fetch(using, "SELECT pg_notify(%s, %s)", (setting("NOTIFY_CHANNEL"), lane))


def lane_predicate(
    column: str, lanes: Sequence[str], exclude_lanes: Sequence[str]
) -> tuple[str, list[str]]:
    """SQL restricting ``column`` to a worker's lane partition."""
    clauses: list[str] = []
    params: list[str] = []
    if lanes:
        clauses.append(f"{column} IN ({', '.join(['%s'] * len(lanes))})")
        params.extend(lanes)
    if exclude_lanes:
        clauses.append(f"{column} NOT IN ({', '.join(['%s'] * len(exclude_lanes))})")
        params.extend(exclude_lanes)
    return (" AND ".join(clauses) or "1 = 1"), params
