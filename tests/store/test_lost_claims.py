"""A claim whose acknowledgement was lost: its token prefix names exactly its jobs."""

from __future__ import annotations

import pytest

import django_watchdog as wd
from django_watchdog.store import recovery
from django_watchdog.store.claims import Partition
from django_watchdog.store.worker_store import WorkerStore

pytestmark = pytest.mark.django_db


def test_only_the_jobs_of_the_lost_claims_token_prefix_are_released() -> None:
    for name in ("lost", "known", "other"):
        wd.enqueue(name, queue=f"q-{name}", priority={"lost": 3, "known": 2, "other": 1}[name])
    store = WorkerStore("default")
    # "_" is a LIKE wildcard: a prefix with one must not match another prefix's rows.
    lost = store.claim(Partition(), worker_id="w1", token="ab_c")
    known = store.claim(Partition(), worker_id="w1", token="abxc")
    other = store.claim(Partition(), worker_id="w2", token="ab_c")  # another worker's
    assert [r.job.job_id for r in (lost, known, other) if r.job] == ["lost", "known", "other"]
    assert lost.claim_token == "ab_c.1"

    assert recovery.lost_claims("default", "w1", ["ab_c"]) == [("lost", "ab_c.1")]
    assert store.release_lost_claims("w1", ["ab_c"]) == (["lost"], [])
    assert [wd.get_job(n).state for n in ("lost", "known", "other")] == [
        "queued",
        "running",
        "running",
    ]
    assert wd.get_job("lost").attempts == 0 and wd.queue_head("q-lost").state == "queued"
    assert store.release_lost_claims("w1", ["ab_c"]) == ([], []), "released once"
