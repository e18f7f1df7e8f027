"""Statistics for watchdog's tables where the database has none (PostgreSQL).

PostgreSQL plans from the statistics autovacuum gathers. A table it has never analyzed (a
new install's until autovacuum's first look, every install's where autovacuum is off), or
last saw empty, has none of how many rows fill a page, and the planner guesses its rows
from their declared widths: about a tenth of the queues there are. On such guesses the default
worker's claim compared each job it walked with every queue, or every ready job with every
queue (50 to 70 ms a claim after a few drains of 4,000 jobs), whatever form the statement
took. So the worker's housekeeping analyzes such a table once it holds ten pages (below
that the planner assumes ten pages of it anyway). Autovacuum keeps the statistics fresh
from there; where it is off they keep at least the rows' density, from which the planner
scales its estimates as the tables grow, and the hot statements are written to hold on
stale statistics (``tests/store/test_claim_index.py``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from django.db import transaction

from .dialects import dialect


@dataclass(frozen=True, slots=True)
class Analyzed:
    """What one look found: tables ``analyzed`` now, tables the connection's role may not
    analyze (``refused``: not their owner), and tables without statistics still too small
    to be worth it (``waiting``)."""

    analyzed: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()


def analyze_unanalyzed(using: str, *, skip: Collection[str] = ()) -> Analyzed:
    """Analyze each of watchdog's tables the database has no statistics of and that holds
    ten pages, but those in ``skip``; each in a transaction of its own, its lock wait
    bounded (an ``ANALYZE`` waits for a vacuum of the table to finish)."""
    d = dialect(using)
    analyzed: list[str] = []
    refused: list[str] = []
    waiting: list[str] = []
    for table, grown in d.unanalyzed_tables():
        if table in skip:
            continue
        if not grown:
            waiting.append(table)
            continue
        with transaction.atomic(using=using):
            d.bound_lock_waits()
            (analyzed if d.analyze(table) else refused).append(table)
    return Analyzed(tuple(analyzed), tuple(refused), tuple(waiting))
