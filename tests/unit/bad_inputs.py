"""The bad-input table of SPEC §4.14: one row per rejected argument of a public verb.

Each case is (id, verb name, keyword arguments, field the error must name). The unit tests
check the verbs raise before touching the database; the store tests check nothing is written.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import django_watchdog as wd

MAX = 2**53 - 1
#: A lone surrogate: a str Python holds but no UTF-8 text (nor either database) can.
SURROGATE = "\ud800"
WEST = timezone(timedelta(hours=-5))
EAST = timezone(timedelta(hours=5))

GOOD_ENQUEUE: dict[str, Any] = {"job_id": "j", "queue": "q"}


def _enqueue(**kwargs: Any) -> dict[str, Any]:
    return {**GOOD_ENQUEUE, **kwargs}


def _case(name: str, verb: str, kwargs: dict[str, Any], field: str) -> Any:
    return pytest.param(verb, kwargs, field, id=name)


BAD_INPUTS = [
    # enqueue: identifiers
    _case("job_id-int", "enqueue", _enqueue(job_id=1), "job_id"),
    _case("job_id-none", "enqueue", _enqueue(job_id=None), "job_id"),
    _case("job_id-bytes", "enqueue", _enqueue(job_id=b"j"), "job_id"),
    _case("job_id-empty", "enqueue", _enqueue(job_id=""), "job_id"),
    _case("job_id-257", "enqueue", _enqueue(job_id="j" * 257), "job_id"),
    _case("job_id-nul", "enqueue", _enqueue(job_id="a\x00b"), "job_id"),
    _case("queue-int", "enqueue", _enqueue(queue=7), "queue"),
    _case("queue-empty", "enqueue", _enqueue(queue=""), "queue"),
    _case("queue-257", "enqueue", _enqueue(queue="q" * 257), "queue"),
    _case("job_id-surrogate", "enqueue", _enqueue(job_id="a" + SURROGATE), "job_id"),
    _case("queue-surrogate", "enqueue", _enqueue(queue=SURROGATE), "queue"),
    _case("queue-nul", "enqueue", _enqueue(queue="q\x00"), "queue"),
    # enqueue: lane grammar
    _case("lane-empty", "enqueue", _enqueue(lane=""), "lane"),
    _case("lane-int", "enqueue", _enqueue(lane=1), "lane"),
    _case("lane-leading-dash", "enqueue", _enqueue(lane="-mail"), "lane"),
    _case("lane-leading-dot", "enqueue", _enqueue(lane=".mail"), "lane"),
    _case("lane-space", "enqueue", _enqueue(lane="mail out"), "lane"),
    _case("lane-slash", "enqueue", _enqueue(lane="mail/out"), "lane"),
    _case("lane-non-ascii", "enqueue", _enqueue(lane="m\u00e9l"), "lane"),
    _case("lane-65", "enqueue", _enqueue(lane="l" * 65), "lane"),
    _case("lane-newline", "enqueue", _enqueue(lane="mail\n"), "lane"),
    # enqueue: priority
    _case("priority-bool", "enqueue", _enqueue(priority=True), "priority"),
    _case("priority-float", "enqueue", _enqueue(priority=1.0), "priority"),
    _case("priority-str", "enqueue", _enqueue(priority="1"), "priority"),
    _case("priority-none", "enqueue", _enqueue(priority=None), "priority"),
    _case("priority-over", "enqueue", _enqueue(priority=MAX + 1), "priority"),
    _case("priority-under", "enqueue", _enqueue(priority=-MAX - 1), "priority"),
    # enqueue: payload
    _case("payload-nan", "enqueue", _enqueue(payload=math.nan), "payload"),
    _case("payload-inf", "enqueue", _enqueue(payload=math.inf), "payload"),
    _case("payload-minus-inf", "enqueue", _enqueue(payload=-math.inf), "payload"),
    _case("payload-nested-nan", "enqueue", _enqueue(payload={"a": [1, math.nan]}), "payload"),
    _case("payload-int-key", "enqueue", _enqueue(payload={1: "a"}), "payload"),
    _case("payload-nested-tuple-key", "enqueue", _enqueue(payload={"a": {(1,): 2}}), "payload"),
    _case("payload-none-key", "enqueue", _enqueue(payload={None: 1}), "payload"),
    _case("payload-object", "enqueue", _enqueue(payload=object()), "payload"),
    _case("payload-bytes", "enqueue", _enqueue(payload=b"x"), "payload"),
    _case("payload-set", "enqueue", _enqueue(payload={1, 2}), "payload"),
    # A tuple would come back as a list: the handler would not get its payload unchanged.
    _case("payload-tuple", "enqueue", _enqueue(payload=(1, 2)), "payload"),
    _case("payload-nul-str", "enqueue", _enqueue(payload="a\x00"), "payload"),
    _case("payload-surrogate", "enqueue", _enqueue(payload=SURROGATE), "payload"),
    _case(
        "payload-nested-surrogate", "enqueue", _enqueue(payload={"a": ["b" + SURROGATE]}), "payload"
    ),
    _case("payload-key-surrogate", "enqueue", _enqueue(payload={"\udfff": 1}), "payload"),
    _case("payload-huge-int", "enqueue", _enqueue(payload=10**5000), "payload"),
    # enqueue: run_after must be a UTC instant both databases and Python can hold
    _case(
        "run_after-max-west",
        "enqueue",
        _enqueue(run_after=datetime.max.replace(tzinfo=WEST)),
        "run_after",
    ),
    _case(
        "run_after-min-east",
        "enqueue",
        _enqueue(run_after=datetime.min.replace(tzinfo=EAST)),
        "run_after",
    ),
    _case("run_after-naive", "enqueue", _enqueue(run_after=datetime(2030, 1, 1)), "run_after"),
    _case("run_after-str", "enqueue", _enqueue(run_after="2030-01-01"), "run_after"),
    _case("timeout-nan", "enqueue", _enqueue(timeout=math.nan), "timeout"),
    _case("timeout-inf", "enqueue", _enqueue(timeout=math.inf), "timeout"),
    # enqueue: recovery policy
    _case("max_recoveries-negative", "enqueue", _enqueue(max_recoveries=-1), "max_recoveries"),
    _case("max_recoveries-bool", "enqueue", _enqueue(max_recoveries=False), "max_recoveries"),
    _case("max_recoveries-float", "enqueue", _enqueue(max_recoveries=1.0), "max_recoveries"),
    _case("max_recoveries-str", "enqueue", _enqueue(max_recoveries="1"), "max_recoveries"),
    _case("max_recoveries-huge", "enqueue", _enqueue(max_recoveries=MAX + 1), "max_recoveries"),
    _case("enqueue-using-unknown", "enqueue", _enqueue(using="nope"), "using"),
    _case("enqueue-using-int", "enqueue", _enqueue(using=1), "using"),
    # cancel
    _case("cancel-job_id-int", "cancel", {"job_id": 1}, "job_id"),
    _case("cancel-job_id-empty", "cancel", {"job_id": ""}, "job_id"),
    _case("cancel-job_id-257", "cancel", {"job_id": "j" * 257}, "job_id"),
    _case("cancel-id-empty", "cancel", {"job_id": "j", "cancellation_id": ""}, "cancellation_id"),
    _case("cancel-id-int", "cancel", {"job_id": "j", "cancellation_id": 3}, "cancellation_id"),
    _case(
        "cancel-id-257", "cancel", {"job_id": "j", "cancellation_id": "c" * 257}, "cancellation_id"
    ),
    _case("cancel-job_id-surrogate", "cancel", {"job_id": SURROGATE}, "job_id"),
    _case(
        "cancel-id-surrogate",
        "cancel",
        {"job_id": "j", "cancellation_id": SURROGATE},
        "cancellation_id",
    ),
    _case(
        "cancel-id-nul", "cancel", {"job_id": "j", "cancellation_id": "c\x00"}, "cancellation_id"
    ),
    _case("cancel-only-int", "cancel", {"job_id": "j", "only_if_queued": 1}, "only_if_queued"),
    _case("cancel-only-none", "cancel", {"job_id": "j", "only_if_queued": None}, "only_if_queued"),
    _case("cancel-using", "cancel", {"job_id": "j", "using": "nope"}, "using"),
    # reads
    _case("get_job-int", "get_job", {"job_id": 5}, "job_id"),
    _case("get_job-empty", "get_job", {"job_id": ""}, "job_id"),
    _case("get_job-surrogate", "get_job", {"job_id": SURROGATE}, "job_id"),
    _case("queue_head-surrogate", "queue_head", {"queue": "q" + SURROGATE}, "queue"),
    _case("queue_head-empty", "queue_head", {"queue": ""}, "queue"),
    _case("queue_head-none", "queue_head", {"queue": None}, "queue"),
    _case("latest_settled-257", "latest_settled", {"queue": "q" * 257}, "queue"),
    # settled feed: cursors, limits, partitions
    _case("after-int", "settled_jobs", {"after": 5}, "after"),
    _case("after-empty", "settled_jobs", {"after": ""}, "after"),
    _case("after-garbage", "settled_jobs", {"after": "nonsense"}, "after"),
    _case("after-no-number", "settled_jobs", {"after": "f1:"}, "after"),
    _case("after-negative", "settled_jobs", {"after": "f1:-1"}, "after"),
    _case("after-other-version", "settled_jobs", {"after": "f2:1"}, "after"),
    _case("after-too-long", "settled_jobs", {"after": "f1:" + "9" * 20}, "after"),
    _case("after-unicode-digits", "settled_jobs", {"after": "f1:\u0661"}, "after"),
    _case("limit-zero", "settled_jobs", {"limit": 0}, "limit"),
    _case("limit-negative", "settled_jobs", {"limit": -1}, "limit"),
    _case("limit-bool", "settled_jobs", {"limit": True}, "limit"),
    _case("limit-float", "settled_jobs", {"limit": 2.0}, "limit"),
    _case("limit-str", "settled_jobs", {"limit": "5"}, "limit"),
    _case("limit-over", "settled_jobs", {"limit": 10_001}, "limit"),
    _case("feed-lane-bad", "settled_jobs", {"lane": "a b"}, "lane"),
    _case("feed-exclude-bad", "settled_jobs", {"exclude_lane": ""}, "exclude_lane"),
    _case("feed-both", "settled_jobs", {"lane": "a", "exclude_lane": "b"}, "exclude_lane"),
    # bulk verbs
    _case("fail_lane-lane-bad", "fail_lane", {"lane": "a b", "reason": "r"}, "lane"),
    _case("fail_lane-reason-empty", "fail_lane", {"lane": "a", "reason": ""}, "reason"),
    _case("fail_lane-reason-201", "fail_lane", {"lane": "a", "reason": "r" * 201}, "reason"),
    _case("fail_lane-reason-int", "fail_lane", {"lane": "a", "reason": 5}, "reason"),
    _case("fail_lane-reason-none", "fail_lane", {"lane": "a", "reason": None}, "reason"),
    _case("fail_lane-reason-surrogate", "fail_lane", {"lane": "a", "reason": SURROGATE}, "reason"),
    _case("fail_lane-reason-nul", "fail_lane", {"lane": "a", "reason": "r\x00"}, "reason"),
    _case("purge-surrogate", "purge_queued", {"queue": SURROGATE}, "queue"),
    _case("purge-empty", "purge_queued", {"queue": ""}, "queue"),
    _case("purge-int", "purge_queued", {"queue": 1}, "queue"),
    _case("purge-using", "purge_queued", {"queue": "q", "using": 0}, "using"),
]


def call(verb: str, kwargs: dict[str, Any]) -> Any:
    """Call the public verb ``verb`` with ``kwargs`` (positional first argument as SPEC §5)."""
    kwargs = dict(kwargs)
    function = getattr(wd, verb)
    first = {
        "enqueue": "job_id",
        "cancel": "job_id",
        "get_job": "job_id",
        "queue_head": "queue",
        "latest_settled": "queue",
        "fail_lane": "lane",
        "purge_queued": "queue",
    }.get(verb)
    if first is None:
        return function(**kwargs)
    return function(kwargs.pop(first), **kwargs)
