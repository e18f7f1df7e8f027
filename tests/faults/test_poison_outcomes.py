"""Poison outcomes (SPEC §9 rule 17): whatever a handler returns or raises settles once.

Values PostgreSQL refuses (NUL, lone surrogates) or no JSON encoder writes (nesting past
the recursion limit, an int of 5,000 digits), from real worker processes, one at a time
and in a batch: each job settles once, storably, saying what happened; the next job of
its queue runs; and in a batch the other jobs settle with their results.
"""

import pytest

import django_watchdog as wd
from django_watchdog.models import Job

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

#: kind -> (outcome, what the stored job says)
EXPECTED = {
    "nul-result": ("completed", "result dropped, it contains a NUL character"),
    "surrogate-result": ("completed", "result dropped, it contains a lone surrogate"),
    "deep-result": ("completed", "result dropped, nested too deeply to encode as JSON"),
    "huge-result": ("completed", "result dropped, not JSON-serialisable"),
    "nul-raise": ("failed", "ValueError: pdf text \\x00 here"),
    "surrogate-raise": ("failed", "ValueError: half an emoji \\ud83d here"),
    "nul-unknown": ("outcome_unknown", "OutcomeUnknown: gateway said \\x00"),
}


@pytest.mark.parametrize("mode", ["single", "batch"])
def test_every_poison_outcome_settles_once_and_its_queue_goes_on(spawn_worker, runs, mode):
    for n, kind in enumerate(EXPECTED):
        wd.enqueue(f"poison-{kind}", queue=f"q{n}", lane="t-poison", payload={"kind": kind})
        wd.enqueue(f"after-{kind}", queue=f"q{n}", lane="t-record", payload={"result": n})
    wd.enqueue("bystander", queue="q-clean", lane="t-record", payload={"result": "fine"})
    args = ("--batch", "16") if mode == "batch" else ("--concurrency", "2")
    worker = spawn_worker("--burst", *args)
    assert worker.wait(timeout=120) == 0, worker.output()

    assert not Job.objects.exclude(state="settled").exists(), worker.output()
    for n, kind in enumerate(EXPECTED):
        job = wd.get_job(f"poison-{kind}")
        outcome, says = EXPECTED[kind]
        assert job.outcome == outcome, (kind, job.outcome, job.failure_reason)
        assert job.result is None
        assert says in (job.failure_reason or job.traceback or ""), (kind, job.traceback)
        assert "\x00" not in (job.traceback or "") + (job.failure_reason or "")
        assert len(runs.starts(job.job_id)) == 1, "settled once, never re-run"
        assert wd.get_job(f"after-{kind}").result == n, "the next job of its queue ran"
    assert wd.get_job("bystander").result == "fine"
    assert "settlement_rejected" not in worker.output()
