"""The flatness workload (watchdog): do its figures hold when the tables are large?

Measured on empty tables, then again with ``flat_queued`` jobs behind one busy queue and
``flat_settled`` settled rows (bench/backlog.py builds them in SQL):

1. drains of ``flat_drain`` jobs over ``flat_queues`` queues by 2 worker processes of one
   thread, with the bench's ``--batch`` and as the default worker (no ``--batch``);
   flatness = rate with the backlog / rate on empty tables, for each;
2. ``enqueue()``, one job per transaction (the enqueue workload's driver code), into a new
   queue and into an existing one, and with the backlog behind the busy queue's
   ``flat_queued`` jobs, each run after a ``CHECKPOINT`` on PostgreSQL: milliseconds per
   enqueue, and counted (bench.connection_costs): the client's and the server's CPU, and on
   PostgreSQL this database's WAL (bytes, records, full-page images, and bytes by relation)
   and the blocks hit and read; cost = with the backlog / empty, timed and counted;
3. ``manage.py watchdog status`` and the admin's job and queue lists (bench/reads.py);
4. with the backlog only: ``manage.py watchdog prune`` of the history's oldest tenth
   (bench/pruning.py) while 2 default workers drain jobs fed to them throughout: rows
   deleted per second, the batch size, the longest batch, and the drain rate during the
   prune against the rate just before it.

Runs in the orchestrator (bench.bench's ``Bench``, passed in), never imports a system.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bench import Bench, Stamps, Workers

SYSTEM = "watchdog"
#: The queue whose head a bench-sleep worker holds running, the backlog queued behind it.
BUSY = "busy"
#: The enqueue figures' jobs stay queued in a lane no worker serves.
IDLE_LANE = "bench-idle"
#: Timed runs of each read (after one warm-up).
READS = 5
#: The prune deletes the oldest 1/PRUNED_SHARE of the settled history.
PRUNED_SHARE = 10
#: Jobs fed to the workers during the prune: chunks of about this many seconds of work.
FEED_SECONDS = 10
#: The two kinds of worker drained: the bench's ``--batch``, and the default worker.
KINDS = ("batch", "default")
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


def measure(bench: Bench, db: str) -> None:
    sizes = bench.sizes
    bench.watchdog(db, "reset", bench.work / "stamps-reset.txt")
    stamps = bench.stamps(f"flat-{db}")
    empty_drains = drains(bench, db, stamps, "e")
    empty_enqueues = enqueues(bench, db, "empty")
    empty_reads = reads(bench, db)
    rows = sizes.flat_queued + sizes.flat_settled
    with bench.workers(
        db, 1, stamps.path, extra=["--lane", "bench-sleep", "--shutdown-grace", "1"]
    ) as sleeper:
        bench.watchdog(db, "flat_busy", stamps.path, queue=BUSY, hold=3600 + rows / 10_000)
        bench.log(
            f"  generating {sizes.flat_queued:,} queued behind one busy queue and "
            f"{sizes.flat_settled:,} settled rows ({db})"
        )
        made = bench.watchdog(
            db,
            "flat_fill",
            stamps.path,
            timeout=600 + rows / 5_000,
            echo=True,
            queue=BUSY,
            queued=sizes.flat_queued,
            settled=sizes.flat_settled,
        )
        bench.log(
            f"  generated in {made['seconds']:.1f}s (inserts {made['insert_seconds']:.1f}s, "
            f"statistics {made['analyze_seconds']:.1f}s, "
            f"checkpoint {made['checkpoint_seconds']:.1f}s): {made['counts']}"
        )
        big_drains = drains(bench, db, stamps, "b")
        big_enqueues = enqueues(bench, db, "big")
        big_reads = reads(bench, db)
        pruned = prune_under_load(bench, db, statistics.median(big_drains["default"]))
        sleeper.check_alive()

    record = bench.record
    for kind, suffix in (("batch", ""), ("default", "_default")):
        empty, big = empty_drains[kind], big_drains[kind]
        record(db, SYSTEM, f"flat_empty{suffix}", empty)
        record(db, SYSTEM, f"flat_big{suffix}", big)
        record(db, SYSTEM, f"flatness{suffix}", ratios(big, empty))
    record_enqueues(bench, db, empty_enqueues, big_enqueues)
    for read in ("status", "admin_jobs", "admin_queues"):
        record(db, SYSTEM, f"flat_{read}_ms_empty", empty_reads[f"{read}_ms"])
        record(db, SYSTEM, f"flat_{read}_ms_big", big_reads[f"{read}_ms"])
    record(db, SYSTEM, "flat_build_rows_per_s", rows / made["insert_seconds"])
    record(db, SYSTEM, "flat_build_s", made["insert_seconds"])
    record(db, SYSTEM, "flat_analyze_s", made["analyze_seconds"])
    record(db, SYSTEM, "flat_checkpoint_s", made["checkpoint_seconds"])
    for metric, figure in pruned.items():
        record(db, SYSTEM, metric, figure)
    bench.results[db][SYSTEM]["flat_backlog"] = {
        "queued": sizes.flat_queued + sizes.flat_drain,
        "settled": sizes.flat_settled,
    }


def ratios(numerators: list[float], denominators: list[float]) -> list[float]:
    return [n / d for n, d in zip(numerators, denominators, strict=True)]


def drains(bench: Bench, db: str, stamps: Stamps, label: str) -> dict[str, list[float]]:
    """Drain rates (jobs/s) of each kind of worker, 2 processes of one thread.

    Each run starts on vacuumed and analyzed tables, as autovacuum would leave them: a
    bench server may run without it, and a ratio must not measure the maintenance missed
    since the previous run."""

    def maintain() -> None:
        bench.watchdog(db, "flat_analyze", stamps.path)

    rates = {}
    for kind in KINDS:
        with bench.workers(db, 2, stamps.path, default_worker=kind == "default") as workers:
            bench.warm_up(SYSTEM, db, workers, stamps, 4)
            rates[kind] = bench.drain_runs(
                SYSTEM,
                db,
                workers,
                stamps,
                bench.sizes.flat_drain,
                bench.sizes.flat_queues,
                f"f{label}{kind[0]}",
                before_each=maintain,
            )
    return rates


def enqueues(bench: Bench, db: str, state: str) -> dict[str, list[Any]]:
    """Per ``enqueue()`` in its own transaction, each into a new queue, all into one
    existing queue and, with the backlog, all behind the busy queue's jobs: milliseconds
    (``kind``), and what it cost, counted (``kind`` + ``COUNTED_SUFFIX``: the driver's
    ``counted``, bench.connection_costs). Each run starts after a ``CHECKPOINT`` on
    PostgreSQL, so the first change of a page writes its full image in every run alike."""
    n, stamp = bench.sizes.enqueue_single, bench.work / "stamps-enqueue.txt"
    queues: dict[str, dict[str, str]] = {"new": {}, "existing": {"queue": f"existing-{state}"}}
    if state == "big":
        queues["behind"] = {"queue": BUSY}
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


def record_enqueues(
    bench: Bench, db: str, empty: dict[str, list[Any]], big: dict[str, list[Any]]
) -> None:
    """The enqueue figures, timed and counted, each with its big / empty ratio (behind the
    busy queue: against the existing queue's on empty tables), and the WAL of each relation
    per enqueue (medians) in the results JSON."""
    record = bench.record
    by_relation: dict[str, dict[str, Any]] = {}
    for kind, base in AGAINST.items():
        empty_ms, big_ms = empty[base], big[kind]
        empty_counts, big_counts = empty[base + COUNTED_SUFFIX], big[kind + COUNTED_SUFFIX]
        if kind != "behind":
            record(db, SYSTEM, f"flat_enqueue_{kind}_ms_empty", empty_ms)
        record(db, SYSTEM, f"flat_enqueue_{kind}_ms_big", big_ms)
        record(db, SYSTEM, f"flat_enqueue_{kind}_cost", ratios(big_ms, empty_ms))
        for counter in COUNTERS:
            small, large = counts(empty_counts, counter), counts(big_counts, counter)
            if large is None or small is None:
                continue
            if kind != "behind":
                record(db, SYSTEM, f"flat_enqueue_{kind}_{counter}_empty", small)
            record(db, SYSTEM, f"flat_enqueue_{kind}_{counter}_big", large)
            if counter in COSTS:
                record(db, SYSTEM, f"flat_enqueue_{kind}_{counter}_cost", ratios(large, small))
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


def reads(bench: Bench, db: str) -> dict[str, list[float]]:
    return bench.watchdog(db, "flat_reads", bench.work / "stamps-reads.txt", times=READS)  # type: ignore[no-any-return]


class Feeder:
    """Keeps ``chunk`` or more jobs queued for the workers, and counts the ones they ran."""

    def __init__(self, bench: Bench, db: str, stamps: Stamps, chunk: int) -> None:
        self.bench, self.db, self.stamps, self.chunk = bench, db, stamps, chunk
        self.prefixes: list[str] = []
        self.added = 0
        self.ran_dry = False

    def add(self) -> float:
        """Commit one more chunk over ``flat_queues`` queues; when it committed."""
        prefix = f"fp{len(self.prefixes)}"
        self.prefixes.append(prefix)
        done = self.bench.watchdog(
            self.db,
            "prefill",
            self.stamps.path,
            n=self.chunk,
            queues=self.bench.sizes.flat_queues,
            tag=prefix,
        )
        self.added += self.chunk
        return float(done["commit"])

    def ran(self) -> int:
        self.stamps.read()
        return sum(len(self.stamps.by_prefix.get(prefix, ())) for prefix in self.prefixes)

    def step(self, workers: Workers) -> int:
        """Top the backlog up if it fell under a chunk; how many jobs ran so far."""
        ran = self.ran()
        if self.added - ran <= 0:
            self.ran_dry = True
        if self.added - ran < self.chunk:
            self.add()
        workers.check_alive()
        time.sleep(0.05)
        return ran

    def rate(self, start: float, end: float) -> float:
        """Jobs started per second between two wall-clock times."""
        self.stamps.read()
        started = [t for prefix in self.prefixes for t in self.stamps.by_prefix.get(prefix, [])]
        return sum(start <= t < end for t in started) / (end - start)


def prune_under_load(bench: Bench, db: str, drain_rate: float) -> dict[str, Any]:
    """Prune the oldest tenth of the history while 2 default workers drain; its figures."""
    sizes = bench.sizes
    oldest = sizes.flat_settled // PRUNED_SHARE
    if not oldest:
        return {}
    stamps = bench.stamps(f"prune-{db}")
    feeder = Feeder(bench, db, stamps, max(sizes.flat_drain, int(drain_rate * FEED_SECONDS)))
    with bench.workers(db, 2, stamps.path, default_worker=True) as workers:
        bench.warm_up(SYSTEM, db, workers, stamps, 4)
        first = feeder.add()
        while feeder.step(workers) < feeder.chunk:
            pass
        before = feeder.rate(first, time.time())
        feeder.ran_dry = False
        with ThreadPoolExecutor(1) as pool:
            pruning = pool.submit(
                bench.watchdog,
                db,
                "flat_prune",
                stamps.path,
                timeout=600 + oldest / 1_000,
                oldest=oldest,
            )
            while not pruning.done():
                feeder.step(workers)
            pruned = pruning.result()
        during = feeder.rate(pruned["started"], pruned["ended"])
    if feeder.ran_dry:
        bench.log("  the workers ran out of jobs during the prune: its drain rate is low")
    seconds = pruned["ended"] - pruned["started"]
    ends = [at for at, _ in pruned["batches"]]
    if pruned["deleted"] and pruned["deleted"] % pruned["batch_size"] == 0:
        ends.append(pruned["total_at"])  # a last batch ran, and found nothing more
    # The first batch holds the command's count of what it will delete; the last is the one
    # that found fewer rows than a batch: it looked through every newer settled row.
    starts = [pruned["started"], *ends[:-1]]
    spans = [end - start for start, end in zip(starts, ends, strict=True)] or [seconds]
    middle = spans[1:-1] or spans
    return {
        "prune_deleted": pruned["deleted"],
        "prune_batch_size": pruned["batch_size"],
        "prune_s": seconds,
        "prune_rows_per_s": pruned["deleted"] / seconds,
        "prune_first_batch_s": spans[0],
        "prune_batch_ms": statistics.median(middle) * 1000,
        "prune_batch_ms_max": max(middle) * 1000,
        "prune_last_batch_s": spans[-1],
        "prune_drain_before": before,
        "prune_drain_during": during,
        "prune_drain_ratio": during / before,
    }
