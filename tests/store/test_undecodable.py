"""A row edited by hand into something that does not decode (SPEC §4.14): that job raises
``WatchdogError(kind="store_unavailable")``; the store goes on with the others."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

import django_watchdog as wd
from django_watchdog import WatchdogError
from django_watchdog.models import Job
from django_watchdog.store.store import Store

from .helpers import DONE, claim_ids, row

pytestmark = pytest.mark.django_db


@contextmanager
def _checks_off() -> Iterator[None]:
    """SQLite only: let a raw write past the JSON_VALID check, as a hand edit could."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA ignore_check_constraints = ON")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA ignore_check_constraints = OFF")


def _bad_lane(job_id: str) -> None:
    # No constraint holds the lane grammar, so an edit around the manager gets it in.
    Job.objects.filter(job_id=job_id).update(lane="not a lane!")


def _bad_json(job_id: str) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL's jsonb column refuses invalid JSON text itself")
    with _checks_off(), connection.cursor() as cursor:
        cursor.execute("UPDATE watchdog_job SET payload = %s WHERE job_id = %s", ["{oops", job_id])


def _bad_id(job_id: str) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL's varchar(256) refuses the over-long value itself")
    Job.objects.filter(job_id=job_id).update(queue="q" * 257)


# Corruptions that keep the job in its queue (a changed queue name would move it elsewhere).
CORRUPTIONS: dict[str, Callable[[str], None]] = {
    "lane-grammar": _bad_lane,
    "payload-not-json": _bad_json,
}


@pytest.fixture(params=sorted(CORRUPTIONS))
def corrupt(request: pytest.FixtureRequest) -> Callable[[str], None]:
    return CORRUPTIONS[request.param]


@pytest.mark.parametrize(
    ("corruption", "names"),
    [(_bad_lane, "the job"), (_bad_id, "the job"), (_bad_json, "the column")],
    ids=["lane-grammar", "queue-too-long", "payload-not-json"],
)
def test_get_job_raises_store_unavailable(corruption: Callable[[str], None], names: str) -> None:
    wd.enqueue("bad", queue="q", payload={"ok": True})
    wd.enqueue("good", queue="q2")
    corruption("bad")
    with pytest.raises(WatchdogError) as caught:
        wd.get_job("bad")
    assert caught.value.kind == "store_unavailable"
    if names == "the job":
        assert caught.value.job_id == "bad"
        assert "'bad'" in str(caught.value)
    else:
        # The JSON field cannot know its row; the message names the column instead.
        assert "'payload'" in str(caught.value)
    # Only that job: the others still read.
    good = wd.get_job("good")
    assert good is not None and good.job_id == "good"


def test_claim_settles_the_bad_row_failed_and_the_next_claim_goes_on(
    corrupt: Callable[[str], None],
) -> None:
    wd.enqueue("bad", queue="q", priority=5, payload={"ok": True})
    wd.enqueue("behind", queue="q")
    wd.enqueue("good", queue="q2")
    corrupt("bad")

    with pytest.raises(WatchdogError) as caught:
        Store().claim()
    assert caught.value.kind == "store_unavailable"
    stored = row("bad") if corrupt is not _bad_json else _raw_state("bad")
    assert stored["state"] == "settled"
    assert stored["outcome"] == "failed"
    assert stored["failure_reason"].startswith("Job row does not decode")
    assert len(stored["failure_reason"]) <= 200

    # No crash loop: the bad job is settled, the queue behind it and other queues go on.
    assert sorted(claim_ids()) == ["behind", "good"]
    assert wd.queue_head("q").state == "idle"


def _raw_state(job_id: str) -> dict[str, str]:
    # values() would decode the broken payload; read the columns that matter by hand.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT state, outcome, failure_reason FROM watchdog_job WHERE job_id = %s", [job_id]
        )
        state, outcome, reason = cursor.fetchone()
    return {"state": state, "outcome": outcome, "failure_reason": reason}


def test_a_bad_running_row_does_not_stop_settling_others() -> None:
    wd.enqueue("bad", queue="q")
    wd.enqueue("good", queue="q2")
    first = Store().claim()
    second = Store().claim()
    assert first.job is not None and second.job is not None
    _bad_lane("bad")
    settled = Store().settle("good", second.claim_token or "", DONE)[0]
    assert settled.status == "settled"


def test_a_quarantined_job_is_announced_and_the_feed_yields_it(
    corrupt: Callable[[str], None],
) -> None:
    """Quarantine is a change like any other: ``queue_changed`` in its transaction, and
    the feed owes the settled job to its reader, exactly once, as stored."""
    from django_watchdog.signals import queue_changed

    wd.enqueue("bad", queue="q", payload={"ok": True})
    corrupt("bad")
    seen: list[tuple[str, str, str | None]] = []

    def receiver(sender: object, *, queue: str, head: object, settled: Job | None, **_: object):
        seen.append((queue, getattr(head, "state", "?"), settled and settled.job_id))

    queue_changed.connect(receiver, sender=Job, dispatch_uid="quarantine-test")
    try:
        with pytest.raises(WatchdogError):
            Store().claim()
    finally:
        queue_changed.disconnect(sender=Job, dispatch_uid="quarantine-test")
    assert seen == [("q", "idle", None)]  # the row cannot be a Job: settled=None
    records = wd.settled_jobs()
    assert [r.job.job_id for r in records] == ["bad"]
    assert records[0].job.failure_reason.startswith("Job row does not decode")
    assert wd.settled_jobs(after=records[0].cursor) == []


def test_the_admin_lists_a_row_that_does_not_decode(admin_client, corrupt) -> None:
    from django.urls import reverse

    wd.enqueue("bad", queue="q", payload={"ok": True})
    wd.enqueue("good", queue="q2")
    corrupt("bad")
    page = admin_client.get(reverse("admin:django_watchdog_job_changelist"))
    assert page.status_code == 200
    assert b"good" in page.content and b"bad" in page.content
    pk = Job.objects.filter(job_id="bad").values_list("pk", flat=True).get()
    detail = admin_client.get(reverse("admin:django_watchdog_job_change", args=[pk]))
    assert detail.status_code == 200
    assert b"bad" in detail.content
