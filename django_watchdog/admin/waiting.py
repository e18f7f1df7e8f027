"""Why a queued job waits, and since when: the admin's answer to "why is it stuck?".

Read for the shown page only, in a fixed number of indexed queries whatever the page
holds: the live workers, and of the page's queues the running jobs, the ready jobs and
the retrying jobs (each served by a partial index). Nothing here writes.

A worker is live by the rule recovery, ``watchdog status`` and the workers page use
(``engine.liveness.alive``: its process on this host, else its heartbeat on the
database's clock). What a live worker can run is its ``Worker.lanes``: a worker registers
the lanes it has a handler for (its ``--lane``/``--exclude-lane`` choice applied), so "no
live worker has a handler for the lane" is read from those rows. A row with no lanes
(older versions) counts as serving every lane but its ``exclude_lanes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.utils.translation import gettext as _

from .. import handlers
from ..domain.states import State
from ..engine import liveness
from ..models import Job, Worker
from ..store import clock
from . import display
from .workers import timeout


@dataclass(frozen=True, kw_only=True, slots=True)
class Surroundings:
    """What decides the wait of the page's queued jobs, read once for the page."""

    served: frozenset[str]  # lanes some live worker lists
    serves_all_but: tuple[frozenset[str], ...]  # exclude lists of live workers listing none
    live_workers: int
    running: dict[str, tuple[str, datetime | None]]  # queue -> (job id, started at)
    ready: dict[str, list[str]]  # queue -> its ready jobs but cancelled ones (its head)
    retrying: dict[str, tuple[str, datetime | None]]  # queue -> (job id, retry at)

    def serves(self, lane: str) -> bool:
        return lane in self.served or any(lane not in excluded for excluded in self.serves_all_but)


def surroundings(jobs: Sequence[Job], using: str | None) -> Surroundings | None:
    """Read what the queued ``jobs`` wait on; ``None`` when none of them is queued."""
    queues = sorted({job.queue for job in jobs if job.state == State.QUEUED})
    if not queues:
        return None
    rows = Job.objects.using(using).order_by()
    served: set[str] = set()
    all_but: list[frozenset[str]] = []
    live = 0
    workers = (
        Worker.objects.using(using)
        .annotate(silent_s=clock.SecondsSince("heartbeat_at"))
        .values_list("host", "pid", "started_at", "silent_s", "lanes", "exclude_lanes")
    )
    limit = timeout()
    for host, pid, started_at, silent_s, lanes, excluded in workers:
        if not liveness.alive(host, pid, started_at, silent_s=float(silent_s), timeout=limit):
            continue
        live += 1
        named = [lane for lane in lanes or [] if isinstance(lane, str)]
        if named:
            served.update(named)
        else:
            all_but.append(frozenset(lane for lane in excluded or [] if isinstance(lane, str)))
    running = {
        queue: (job_id, started)
        for queue, job_id, started in rows.filter(
            queue__in=queues, state=State.RUNNING
        ).values_list("queue", "job_id", "started_at")
    }
    ready: dict[str, list[str]] = {}
    heads = rows.filter(queue__in=queues, ready=True, cancellation_id__isnull=True)
    for queue, job_id in heads.values_list("queue", "job_id"):
        ready.setdefault(queue, []).append(job_id)
    retrying = {
        queue: (job_id, at)
        for queue, job_id, at in rows.filter(
            queue__in=queues, state=State.QUEUED, retry_at__isnull=False
        ).values_list("queue", "job_id", "retry_at")
    }
    return Surroundings(
        served=frozenset(served),
        serves_all_but=tuple(all_but),
        live_workers=live,
        running=running,
        ready=ready,
        retrying=retrying,
    )


def reason(job: Job, around: Surroundings, now: datetime) -> str:
    """Why queued ``job`` has not started yet, the most fundamental cause first."""
    if job.cancellation_id is not None:
        return _("cancellation recorded: the next claim settles it cancelled")
    if job.delayed and job.run_after is not None:
        if job.run_after > now:
            return _("delayed until %(at)s (in %(left)s)") % {
                "at": display.timestamp(job.run_after),
                "left": display.duration(job.run_after - now),
            }
        return _("due since %(at)s: a worker gives it its place in the queue at its next pass") % {
            "at": display.timestamp(job.run_after)
        }
    if job.retry_at is not None and job.retry_at > now:
        return _("failed attempt %(n)s; retry at %(at)s (in %(left)s)") % {
            "n": job.attempts,
            "at": display.timestamp(job.retry_at),
            "left": display.duration(job.retry_at - now),
        }
    if not around.live_workers:
        return _("no live worker: no worker has sent a heartbeat recently")
    if not around.serves(job.lane):
        if job.lane not in handlers.registered():
            return _(
                "no live worker serves lane %(lane)s, and this project registers no handler for it"
            ) % {"lane": job.lane}
        return _("no live worker serves lane %(lane)s (none has a handler for it)") % {
            "lane": job.lane
        }
    running = around.running.get(job.queue)
    if running is not None:
        return _("behind running job %(job)s (running for %(for)s)") % {
            "job": running[0],
            "for": display.age(running[1], now),
        }
    if job.ready:
        return _("ready: waiting for a free worker slot")
    retrying = around.retrying.get(job.queue)
    if retrying is not None and retrying[0] != job.job_id:
        return _("behind job %(job)s, which retries at %(at)s") % {
            "job": retrying[0],
            "at": display.timestamp(retrying[1]),
        }
    heads = [other for other in around.ready.get(job.queue, []) if other != job.job_id]
    if heads:
        return _("behind queued job %(job)s, the head of its queue") % {"job": heads[0]}
    return _("waiting for its turn in queue %(queue)s") % {"queue": job.queue}
