import pytest

import django_watchdog as wd
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job

pytestmark = pytest.mark.django_db


def test_roundtrip():
    r = wd.enqueue("a", queue="q", payload={"x": 1})
    assert r.status == "queued"
    assert wd.enqueue("a", queue="q", payload={"x": 1}).status == "duplicate"
    wd.enqueue("b", queue="q", priority=5)
    assert wd.queue_head("q").job_id == "b"
    c = Job.objects.claim()
    assert c.status == "claimed" and c.job.job_id == "b"
    assert Job.objects.claim().status == "none"
    s = Job.objects.settle("b", c.claim_token, Decision.completed(3))
    assert s.status == "settled" and s.job.result == 3
    c2 = Job.objects.claim()
    assert c2.job.job_id == "a"
    Job.objects.settle("a", c2.claim_token, Decision.failed("E: x"))
    feed = wd.settled_jobs()
    assert [r.job.job_id for r in feed] == ["a", "b"]
    assert wd.settled_jobs(after=feed[-1].cursor) == []
