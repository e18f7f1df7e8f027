"""The flatness workload's single enqueues (bench/flatness.py's step 2), timed and counted.

Each run is ``bench.sizes.enqueue_single`` calls of ``enqueue()``, one job per transaction
(the driver's ``enqueue_single``) into a lane no worker serves, after a ``CHECKPOINT`` on
PostgreSQL; besides its wall time, the driver counts what it cost per enqueue
(bench.connection_costs): the client's and the server's CPU, and on PostgreSQL this
database's WAL (bytes, records, full-page images and their bytes, bytes by relation) and
the blocks hit and read. Each figure is recorded on empty tables and on the big ones, and
the main ones with their big / empty ratio.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bench import Bench

SYSTEM = "watchdog"
#: The enqueues' jobs stay queued in a lane no worker serves.
IDLE_LANE = "bench-idle"
#: The enqueue figures' counted cost, by the name of the driver's figure: (label, unit).
#: Each has its big / empty ratio (``COSTS``); the others are recorded for the record.
COUNTED = {
    "cpu_us": ("client + server CPU", "µs"),
    "wal_bytes": ("WAL, this database's records", "bytes"),
    "blocks": ("blocks hit + read", "blocks"),
}
COSTS = tuple(COUNTED)
COUNTERS = (
    *COSTS,
    "client_cpu_us",
    "server_cpu_us",
    "wal_records",
    "wal_fpi",
    "wal_fpi_bytes",
    "wal_bytes_server",
    "blocks_read",
)
#: ``enqueues()``: the key of a kind's counted figures.
COUNTED_SUFFIX = "_counted"
#: The enqueue cases' labels in the printed table (behind: on the big tables only).
CASES = {
    "new": "new queue",
    "existing": "existing queue",
    "behind": "behind the busy queue",
}
#: Each enqueue case's figures on the big tables against those of this case on empty ones.
AGAINST = {"new": "new", "existing": "existing", "behind": "existing"}


def counted_rows() -> list[tuple[str, str]]:
    """The printed table's rows of the counted enqueue cost (bench.bench's ``ROWS``)."""
    rows = []
    for kind, case in CASES.items():
        for counter, (label, unit) in COUNTED.items():
            if kind != "behind":
                rows.append(
                    (
                        f"flat_enqueue_{kind}_{counter}_empty",
                        f"enqueue, {case}, {label}, empty ({unit})",
                    )
                )
            rows.append(
                (f"flat_enqueue_{kind}_{counter}_big", f"enqueue, {case}, {label}, big ({unit})")
            )
            against = "existing queue, empty" if kind == "behind" else "empty"
            rows.append(
                (
                    f"flat_enqueue_{kind}_{counter}_cost",
                    f"enqueue counted cost, {case}, {label} (big / {against})",
                )
            )
    return rows


def enqueues(bench: Bench, db: str, state: str, behind: str | None = None) -> dict[str, list[Any]]:
    """Per ``enqueue()`` in its own transaction, each into a new queue, all into one
    existing queue and, given ``behind``, all behind that busy queue's jobs: milliseconds
    (``kind``), and what it cost, counted (``kind`` + ``COUNTED_SUFFIX``: the driver's
    ``counted``, bench.connection_costs). Each run starts after a ``CHECKPOINT`` on
    PostgreSQL, so the first change of a page writes its full image in every run alike."""
    n, stamp = bench.sizes.enqueue_single, bench.work / "stamps-enqueue.txt"
    queues: dict[str, dict[str, str]] = {"new": {}, "existing": {"queue": f"existing-{state}"}}
    if behind is not None:
        queues["behind"] = {"queue": behind}
    found: dict[str, list[Any]] = {}
    for rep in range(bench.repeat):
        for kind, where in queues.items():
            tag = f"n{kind[0]}{state[0]}:{rep}"
            done = bench.watchdog(
                db,
                "enqueue_single",
                stamp,
                n=n,
                tag=tag,
                lane=IDLE_LANE,
                counted=True,
                checkpoint=True,
                **where,
            )
            found.setdefault(kind, []).append(done["seconds"] / n * 1000)
            found.setdefault(kind + COUNTED_SUFFIX, []).append(done["counted"])
    return found


def record(bench: Bench, db: str, empty: dict[str, list[Any]], big: dict[str, list[Any]]) -> None:
    """The enqueue figures, timed and counted, each with its big / empty ratio (behind the
    busy queue: against the existing queue's on empty tables), and the WAL of each relation
    per enqueue (medians) in the results JSON."""
    by_relation: dict[str, dict[str, Any]] = {}
    for kind, base in AGAINST.items():
        empty_ms, big_ms = empty[base], big[kind]
        empty_counts, big_counts = empty[base + COUNTED_SUFFIX], big[kind + COUNTED_SUFFIX]
        if kind != "behind":
            bench.record(db, SYSTEM, f"flat_enqueue_{kind}_ms_empty", empty_ms)
        bench.record(db, SYSTEM, f"flat_enqueue_{kind}_ms_big", big_ms)
        bench.record(db, SYSTEM, f"flat_enqueue_{kind}_cost", ratios(big_ms, empty_ms))
        for counter in COUNTERS:
            small, large = counts(empty_counts, counter), counts(big_counts, counter)
            if large is None or small is None:
                continue
            if kind != "behind":
                bench.record(db, SYSTEM, f"flat_enqueue_{kind}_{counter}_empty", small)
            bench.record(db, SYSTEM, f"flat_enqueue_{kind}_{counter}_big", large)
            if counter in COSTS:
                bench.record(
                    db, SYSTEM, f"flat_enqueue_{kind}_{counter}_cost", ratios(large, small)
                )
        for state, runs in (("empty", empty_counts), ("big", big_counts)):
            if kind == "behind" and state == "empty":
                continue
            for what in ("wal_by_relation", "fpi_by_relation"):
                medians = median_by_key([run.get(what) or {} for run in runs])
                if medians:
                    by_relation.setdefault(f"{kind}_{state}", {})[what] = medians
    if by_relation:
        bench.results[db][SYSTEM]["flat_enqueue_wal_by_relation"] = by_relation
        for case, figures in by_relation.items():
            top = ", ".join(
                f"{name} {size:.0f}" for name, size in list(figures["wal_by_relation"].items())[:8]
            )
            bench.log(f"  enqueue WAL per relation ({case}, bytes per enqueue): {top}")


def counts(runs: list[dict[str, Any]], counter: str) -> list[float] | None:
    """``counter``'s figure in each run; ``None`` where the database does not count it."""
    figures = [run.get(counter) for run in runs]
    return None if any(f is None for f in figures) else [float(f) for f in figures]


def median_by_key(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each key's median over the runs (0 in a run that lacks it), largest first."""
    keys = {key for run in runs for key in run}
    medians = {key: statistics.median(run.get(key, 0.0) for run in runs) for key in keys}
    return dict(sorted(medians.items(), key=lambda item: -item[1]))


def ratios(numerators: list[float], denominators: list[float]) -> list[float]:
    return [n / d for n, d in zip(numerators, denominators, strict=True)]
