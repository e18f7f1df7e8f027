"""A real worker process with tracing on: the jobs a "request" enqueued inside its span
run in spans of the request's trace, children of the enqueue spans (single and batch
execution, a sync and an ``async def`` handler, a failure)."""

import json

import pytest

import django_watchdog as wd

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def exported(path):
    """The spans the worker wrote, one JSON object per line."""
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@pytest.mark.parametrize("execution", [(), ("--batch", "3")], ids=["single", "batch"])
def test_the_worker_continues_the_trace_of_the_request_that_enqueued(
    spawn_worker, spans, tmp_path, execution
):
    with spans.tracer.start_as_current_span("POST /orders") as request:
        wd.enqueue("sync", queue="a", lane="t-record")
        wd.enqueue("async", queue="b", lane="t-async")
        wd.enqueue("fails", queue="c", lane="t-fail")
    enqueue_spans = {
        s.attributes["watchdog.job_id"]: s.context.span_id for s in spans.named("watchdog.enqueue")
    }
    path = tmp_path / "spans.jsonl"
    worker = spawn_worker(
        "--burst",
        *execution,
        "--lane",
        "t-record",
        "--lane",
        "t-async",
        "--lane",
        "t-fail",
        env={
            "DJANGO_SETTINGS_MODULE": "tests.acceptance.tracing_settings",
            "WATCHDOG_TEST_SPANS": str(path),
        },
    )
    assert worker.wait() == 0, worker.output()

    runs = {
        s["attributes"]["watchdog.job_id"]: s for s in exported(path) if s["name"] == "watchdog.run"
    }
    assert {job_id: run["attributes"]["watchdog.outcome"] for job_id, run in runs.items()} == {
        "sync": "completed",
        "async": "completed",
        "fails": "failed",
    }
    trace_id = f"0x{request.get_span_context().trace_id:032x}"
    for job_id, run in runs.items():
        assert run["kind"] == "SpanKind.CONSUMER"
        assert run["context"]["trace_id"] == trace_id, job_id
        assert run["parent_id"] == f"0x{enqueue_spans[job_id]:016x}", job_id
    assert runs["fails"]["status"]["status_code"] == "ERROR"
    assert [e["name"] for e in runs["fails"]["events"]] == ["exception"]
