"""Several worker processes share the work: exactly once, serial per queue, in order."""

import random
from collections import defaultdict

import pytest

import django_watchdog as wd
from django_watchdog.models import Job

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


#: Every job waits, once started, until this many processes have started jobs. A process
#: claims at most 2 threads x 4 (batch) of the 12 queue heads, so at least two processes
#: hold heads while they wait: the sharing is arranged, not left to the scheduler (one
#: process took all 60 jobs on a busy machine). Waiting for all three could block for good:
#: two processes may hold all 12 heads between them.
SHARED_BY = 2


@pytest.mark.parametrize("batch", ["1", "4"])
def test_three_processes_run_every_job_once_serially_in_priority_order(spawn_worker, runs, batch):
    rng = random.Random(20261201)
    expected_order = defaultdict(list)
    for queue_number in range(12):
        queue = f"q{queue_number}"
        for n in range(5):
            job_id = f"{queue}-{n}"
            priority = rng.randint(-3, 3)
            wd.enqueue(
                job_id,
                queue=queue,
                lane="t-record",
                priority=priority,
                payload={"sleep": rng.choice([0, 0.005, 0.02]), "await_pids": SHARED_BY},
            )
            expected_order[queue].append((-priority, n, job_id))

    workers = [spawn_worker("--burst", "--concurrency", "2", "--batch", batch) for _ in range(3)]
    for worker in workers:
        assert worker.wait(timeout=120) == 0, worker.output()

    assert set(Job.objects.values_list("outcome", flat=True)) == {"completed"}
    starts, ends = runs.starts(), runs.ends()
    started_ids = [r["job_id"] for r in starts]
    assert len(started_ids) == 60 and len(set(started_ids)) == 60, "every job ran exactly once"

    by_queue = defaultdict(list)
    end_of = {r["job_id"]: r["time"] for r in ends}
    for record in starts:
        by_queue[record["queue"]].append(record)
    for queue, records in by_queue.items():
        records.sort(key=lambda r: r["time"])
        for earlier, later in zip(records, records[1:], strict=False):
            assert end_of[earlier["job_id"]] <= later["time"], f"{queue} ran two jobs at once"
        assert [r["job_id"] for r in records] == [j for *_, j in sorted(expected_order[queue])]
    assert len({r["pid"] for r in starts}) >= SHARED_BY, "the work was shared between processes"
