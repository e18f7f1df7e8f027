"""A page of queues' counts (``Store.capped_counts``): per queue and state, its jobs counted
up to the cap per part, and the earliest enqueued of the queued ones read."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.models import Job
from django_watchdog.store.store import Store

from .helpers import DONE, claimed

pytestmark = pytest.mark.django_db

CAP = 3


def counts(names: list[str]) -> dict[tuple[str, str], tuple[int, object]]:
    found = Store("default").capped_counts(names, CAP)
    return {(queue, state): (count, at) for queue, state, count, at in found if count}


def test_each_queue_counts_its_own_jobs_per_state_up_to_the_cap_per_part() -> None:
    later = timezone.now() + timedelta(hours=1)
    for n in range(2):
        wd.enqueue(f"done-{n}", queue="busy")
        result = claimed()
        Store().settle(result.job.job_id, result.claim_token or "", DONE)
    wd.enqueue("run", queue="busy")
    claimed()
    for n in range(5):
        wd.enqueue(f"wait-{n}", queue="busy", priority=n % 2)
    for n in range(2):
        wd.enqueue(f"later-{n}", queue="busy", run_after=later)
    wd.enqueue("alone", queue="Busy ")  # another queue: names compare byte for byte
    names = ["busy", "Busy ", "busy ", "BUSY", "empty"]
    oldest = {
        queue: Job.objects.filter(queue=queue, state="queued").earliest("enqueued_at").enqueued_at
        for queue in ("busy", "Busy ")
    }
    found = counts(names)
    assert found.pop(("busy", "queued"))[0] == CAP + 2  # 3 of 5 waiting, 2 delayed
    assert found == {
        ("busy", "running"): (1, None),
        ("busy", "settled"): (2, None),
        ("Busy ", "queued"): (1, oldest["Busy "]),
    }
    # Below the cap, the earliest enqueued of every queued job.
    Job.objects.filter(job_id__in=["wait-2", "wait-3", "wait-4"]).delete()
    assert counts(["busy"])[("busy", "queued")] == (4, oldest["busy"])


def test_a_settled_history_counts_up_to_the_cap() -> None:
    for n in range(CAP + 2):
        wd.enqueue(f"done-{n}", queue="old")
        result = claimed()
        Store().settle(result.job.job_id, result.claim_token or "", DONE)
    assert counts(["old"]) == {("old", "settled"): (CAP, None)}
    assert Store("default").capped_counts([], CAP) == []
