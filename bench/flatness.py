"""The flatness workload (watchdog): do its figures hold when the tables are large?

Measured on empty tables, then again with ``flat_queued`` jobs behind one busy queue and
``flat_settled`` settled rows (bench/backlog.py builds them in SQL):

1. drains of ``flat_drain`` jobs over ``flat_queues`` queues by 2 worker processes of one
   thread, with the bench's ``--batch`` and as the default worker (no ``--batch``);
   flatness = rate with the backlog / rate on empty tables, for each;
2. ``enqueue()``, one job per transaction (the enqueue workload's driver code), into a new
   queue and into an existing one, and with the backlog behind the busy queue's
   ``flat_queued`` jobs (bench/flat_enqueues.py): milliseconds per enqueue, and what it
   cost, counted (CPU, and on PostgreSQL WAL and blocks); cost = with the backlog / empty,
   timed and counted;
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

from bench import flat_enqueues
from bench.flat_enqueues import ratios

if TYPE_CHECKING:
    from .bench import Bench, Stamps, Workers

SYSTEM = "watchdog"
#: The queue whose head a bench-sleep worker holds running, the backlog queued behind it.
BUSY = "busy"
#: Timed runs of each read (after one warm-up).
READS = 5
#: The prune deletes the oldest 1/PRUNED_SHARE of the settled history.
PRUNED_SHARE = 10
#: Jobs fed to the workers during the prune: chunks of about this many seconds of work.
FEED_SECONDS = 10
#: The two kinds of worker drained: the bench's ``--batch``, and the default worker.
KINDS = ("batch", "default")


def measure(bench: Bench, db: str) -> None:
    sizes = bench.sizes
    bench.watchdog(db, "reset", bench.work / "stamps-reset.txt")
    stamps = bench.stamps(f"flat-{db}")
    empty_drains = drains(bench, db, stamps, "e")
    empty_enqueues = flat_enqueues.enqueues(bench, db, "empty")
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
        big_enqueues = flat_enqueues.enqueues(bench, db, "big", behind=BUSY)
        big_reads = reads(bench, db)
        pruned = prune_under_load(bench, db, statistics.median(big_drains["default"]))
        sleeper.check_alive()

    record = bench.record
    for kind, suffix in (("batch", ""), ("default", "_default")):
        empty, big = empty_drains[kind], big_drains[kind]
        record(db, SYSTEM, f"flat_empty{suffix}", empty)
        record(db, SYSTEM, f"flat_big{suffix}", big)
        record(db, SYSTEM, f"flatness{suffix}", ratios(big, empty))
    flat_enqueues.record(bench, db, empty_enqueues, big_enqueues)
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
