"""What a worker logs for operators: a final failure once at ERROR with its exception,
retries at WARNING, completions at INFO, every field also as ``extra`` data."""

import logging

from django_watchdog import RetryPolicy
from django_watchdog.handlers import HandlerOptions

from .test_engine import FakeStore, fake_job, make_worker


class RetryingStore(FakeStore):
    """Answers a settle that carries ``retry_at`` as the store does: ``retrying``."""

    def settle(self, job_id, claim_token, decision, **kwargs):
        settled, claimed = super().settle(job_id, claim_token, decision, **kwargs)
        if decision.retry_at is not None:
            settled = type(settled)(status="retrying", job=settled.job)
            settled.job.outcome = None
            settled.job.retry_at = decision.retry_at
        return settled, claimed


def records(caplog, event):
    return [r for r in caplog.records if getattr(r, "event", None) == event]


def test_a_completion_is_logged_at_info_with_its_fields_as_extra(caplog):
    caplog.set_level(logging.DEBUG, logger="django_watchdog")
    make_worker(FakeStore([fake_job("a")]), {"l": lambda job: "done"}).run_once()
    (settle,) = records(caplog, "settle")
    assert settle.levelno == logging.INFO
    assert settle.getMessage().startswith(
        "event=settle job_id=a queue=q-a lane=l outcome=completed"
    )
    assert (settle.job_id, settle.queue, settle.lane, settle.outcome) == (
        "a",
        "q-a",
        "l",
        "completed",
    )
    assert settle.worker == "w1" and isinstance(settle.duration_s, float)
    assert settle.exc_info is None


def test_a_final_failure_is_logged_once_at_error_with_its_exception(caplog):
    def handle(job):
        raise ValueError("card declined")

    caplog.set_level(logging.DEBUG, logger="django_watchdog")
    make_worker(FakeStore([fake_job("a")]), {"l": handle}).run_once()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    (failure,) = errors
    assert failure.event == "settle" and failure.outcome == "failed"
    assert failure.reason == "ValueError: card declined"
    assert isinstance(failure.exc_info[1], ValueError)
    assert "card declined" in failure.exc_info[1].args[0]


def test_a_retry_is_logged_at_warning_and_only_the_last_failure_at_error(caplog):
    def handle(job):
        raise ConnectionError(f"attempt {job.attempts}")

    options = {"l": HandlerOptions(retry=RetryPolicy(max_attempts=2, backoff=1, jitter=0))}
    first, last = fake_job("a"), fake_job("a")
    last.attempts = 2
    store = RetryingStore([first])
    worker = make_worker(store, {"l": handle}, lane_options=options)
    caplog.set_level(logging.DEBUG, logger="django_watchdog")
    worker.run_once()
    (retry,) = records(caplog, "settle")
    assert retry.levelno == logging.WARNING and retry.outcome == "retrying"
    assert retry.retry_at and not [r for r in caplog.records if r.levelno >= logging.ERROR]
    caplog.clear()
    store.queue.append(last)
    worker.run_once()
    (failure,) = records(caplog, "settle")
    assert failure.levelno == logging.ERROR and failure.outcome == "failed"
    assert str(failure.exc_info[1]) == "attempt 2"


def test_a_field_named_like_a_log_record_attribute_keeps_the_record_intact(caplog):
    from django_watchdog.engine import events

    caplog.set_level(logging.INFO, logger="django_watchdog")
    events.log(logging.INFO, "example", name="mine", lineno="x", job_id="a")
    (record,) = records(caplog, "example")
    assert record.name == "django_watchdog.worker"
    assert (record.watchdog_name, record.watchdog_lineno, record.job_id) == ("mine", "x", "a")


def test_the_worker_says_it_started_through_logging(caplog):
    caplog.set_level(logging.INFO, logger="django_watchdog")
    make_worker(FakeStore(), {"l": print, "m": print}, concurrency=2)
    (started,) = records(caplog, "worker_started")
    assert (started.worker, started.lanes, started.concurrency, started.batch) == (
        "w1",
        "l,m",
        2,
        1,
    )


def test_the_documented_json_formatter_writes_every_field_of_a_worker_line(caplog):
    import json

    from tests.glue.test_docs_examples import sessions

    ((kind, code, _), *_) = sessions()["how-to/logs-and-signals.md:how-to"]
    namespace = {"__name__": "docs_json_logging"}
    exec(compile(code, "docs/how-to/logs-and-signals.md", "exec"), namespace)  # noqa: S102
    formatter = namespace["JsonFormatter"]()

    def handle(job):
        if job.job_id == "b":
            raise ValueError("boom")
        return "ok"

    caplog.set_level(logging.INFO, logger="django_watchdog")
    make_worker(FakeStore([fake_job("a"), fake_job("b")]), {"l": handle}).run_once()
    lines = [json.loads(formatter.format(r)) for r in records(caplog, "settle")]
    completed, failed = lines
    assert completed["level"] == "INFO" and completed["logger"] == "django_watchdog.worker"
    assert {k: completed[k] for k in ("event", "job_id", "queue", "lane", "outcome", "worker")} == {
        "event": "settle",
        "job_id": "a",
        "queue": "q-a",
        "lane": "l",
        "outcome": "completed",
        "worker": "w1",
    }
    assert isinstance(completed["duration_s"], float)
    assert (failed["level"], failed["outcome"], failed["reason"]) == (
        "ERROR",
        "failed",
        "ValueError: boom",
    )
    assert "Traceback" in failed["exception"] and "ValueError: boom" in failed["exception"]
