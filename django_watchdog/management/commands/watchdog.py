"""``manage.py watchdog``: status and operations from the shell (see docs/how-to/operations.md)."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet
from django.utils import timezone

from ... import api
from ...conf import seconds
from ...domain import reruns, validation
from ...domain.errors import WatchdogError
from ...engine import liveness
from ...engine.housekeeping import retention
from ...ops import status as status_view
from ...ops.tables import ago, parse_age
from ...store import estimates
from ...store.store import PRUNE_BATCH, Store

#: The units ``--older-than`` accepts, as its help and its refusal name them.
AGE_UNITS = "s (seconds), m (minutes), h (hours), d (days), w (weeks), or ISO 8601 such as P7D"
#: ``prune`` counts the jobs it is about to delete exactly up to this many, then estimates.
PRUNE_COUNT_LIMIT = 10_000
_BARE_NUMBER = re.compile(r"^\s*\d+(?:\.\d+)?\s*$")


def _age(text: str) -> timedelta:
    """An age with its unit: a bare number is refused, never read as seconds."""
    if _BARE_NUMBER.match(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} has no unit: write e.g. {text.strip()}d; accepted units: {AGE_UNITS}"
        )
    try:
        return parse_age(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _batch_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 1 to 100000")
    return value


class Command(BaseCommand):
    help = (
        "Inspect and operate the watchdog job tables: status, cancel, rerun, fail-lane, "
        "purge, recover, prune. Destructive actions (fail-lane, purge, prune) say how many jobs "
        "they will change and ask for confirmation unless --yes; answering no changes "
        "nothing and exits 0."
    )
    # call_command(..., stdin=...) for tests, as createsuperuser takes it.
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

        status = actions.add_parser("status", help="Lanes, queues, workers and job counts.")
        status.add_argument("--json", action="store_true", help="Print one JSON object.")

        cancel = actions.add_parser("cancel", help="Record a cancellation intent for a job.")
        cancel.add_argument("job_id", metavar="JOB_ID")
        cancel.add_argument("--cancellation-id", default=None, metavar="ID")
        cancel.add_argument(
            "--only-if-queued",
            action="store_true",
            help="Refuse (conflict) if the job is already running or settled.",
        )

        rerun = actions.add_parser(
            "rerun",
            help="Enqueue a settled failed, interrupted or cancelled job again, as a new job.",
        )
        rerun.add_argument("job_id", metavar="JOB_ID")
        rerun.add_argument(
            "--rerun-id",
            default=None,
            metavar="ID",
            help="The new job's id (default <JOB_ID>~rerun-<n>, n the next number); "
            "repeating a rerun with the same id re-runs once.",
        )

        fail = actions.add_parser(
            "fail-lane", help="Settle every queued and running job of a lane 'failed'."
        )
        fail.add_argument("lane", metavar="LANE")
        fail.add_argument("--reason", required=True, help="The failure reason (1-200 chars).")
        self._yes(fail)

        purge = actions.add_parser("purge-queued", help="Delete a queue's queued jobs.")
        purge.add_argument("queue", metavar="QUEUE")
        self._yes(purge)

        actions.add_parser("recover", help="Reconcile running jobs whose worker disappeared, now.")

        prune = actions.add_parser(
            "prune",
            help="Delete settled jobs older than an age.",
            description="Delete settled jobs that settled more than AGE ago, in batches. "
            "Asks first, saying how many jobs will go (unless --yes). On SQLite it waits "
            "between two batches as long as the batch took, so workers get the write lock.",
        )
        prune.add_argument(
            "--older-than",
            type=_age,
            default=None,
            metavar="AGE",
            help=f"A number with its unit, e.g. 30d, 12h, 90m, P7D; units: {AGE_UNITS}. "
            "A bare number is refused. Default: WATCHDOG['RETENTION'].",
        )
        prune.add_argument(
            "--batch-size",
            type=_batch_size,
            default=PRUNE_BATCH,
            metavar="N",
            help=f"Jobs deleted per transaction (default {PRUNE_BATCH}).",
        )
        self._yes(prune)

        for action in actions.choices.values():
            action.add_argument(
                "--database",
                default=DEFAULT_DB_ALIAS,
                help="Database alias holding the watchdog tables (default 'default').",
            )

    @staticmethod
    def _yes(parser: CommandParser) -> None:
        parser.add_argument("--yes", "-y", action="store_true", help="Do not ask for confirmation.")

    def handle(self, *args: Any, **options: Any) -> None:
        using = options["database"]
        if using not in connections:
            raise CommandError(f"--database: {using!r} is not a configured database alias")
        self.stdin: TextIO = options.get("stdin") or sys.stdin
        actions: dict[str, Callable[[str, dict[str, Any]], None]] = {
            "status": self.status,
            "cancel": self.cancel,
            "rerun": self.rerun,
            "fail-lane": self.fail_lane,
            "purge-queued": self.purge_queued,
            "recover": self.recover,
            "prune": self.prune,
        }
        try:
            actions[options["action"]](using, options)
        except WatchdogError as error:
            raise CommandError(str(error)) from error

    # -- actions -------------------------------------------------------------------------

    def status(self, using: str, options: dict[str, Any]) -> None:
        snapshot = status_view.collect(using, now=timezone.now())
        if options["json"]:
            self.stdout.write(json.dumps(snapshot.as_json(), indent=2, sort_keys=True))
        else:
            self.stdout.write(status_view.render(snapshot))

    def cancel(self, using: str, options: dict[str, Any]) -> None:
        result = api.cancel(
            options["job_id"],
            cancellation_id=options["cancellation_id"],
            only_if_queued=options["only_if_queued"],
            requested_by=requester(),
            using=using,
        )
        if result.status == "missing":
            raise CommandError(f"no job {options['job_id']!r}")
        if result.status == "conflict":
            raise CommandError(
                f"job {options['job_id']!r}: cancellation refused (another cancellation "
                "was recorded, or --only-if-queued and the job is not queued)"
            )
        self.stdout.write(f"{options['job_id']}: cancellation {result.status}")

    def rerun(self, using: str, options: dict[str, Any]) -> None:
        result = api.rerun(
            options["job_id"],
            rerun_id=options["rerun_id"],
            requested_by=requester(),
            using=using,
        )
        already = " (already re-run under this id)" if result.status == "duplicate" else ""
        self.stdout.write(
            f"{options['job_id']}: re-run as {result.job.job_id}, {result.job.state}{already}"
        )

    def fail_lane(self, using: str, options: dict[str, Any]) -> None:
        from ...models import PENDING_JOBS, Job

        lane = validation.lane(options["lane"])
        reason = validation.reason(options["reason"])
        pending = Job.objects.using(using).filter(PENDING_JOBS, lane=lane)
        count = pending.count()
        if not count:
            self.stdout.write(f"lane {lane!r} has no queued or running jobs")
            return
        if not self._confirm(
            options, f"Fail {count} queued and running jobs of lane {lane!r} ({reason!r})?"
        ):
            return
        total = 0
        while True:
            failure = api.fail_lane(lane, reason, using=using)
            total += len(failure.jobs)
            self.stdout.write(
                f"failed {len(failure.jobs)} jobs ({total} so far)"
                + (", more remain" if failure.more else "")
            )
            if not failure.more:
                break
        self.stdout.write(f"lane {lane!r}: {total} jobs failed")

    def purge_queued(self, using: str, options: dict[str, Any]) -> None:
        from ...models import Job

        queue = validation.identifier(options["queue"], "queue")
        count = Job.objects.using(using).filter(queue=queue, state="queued").count()
        if not count:
            self.stdout.write(f"queue {queue!r} has no queued jobs")
            return
        if not self._confirm(options, f"Delete {count} queued jobs of queue {queue!r}?"):
            return
        deleted = api.purge_queued(queue, using=using)
        self.stdout.write(f"queue {queue!r}: {deleted} queued jobs deleted")

    def recover(self, using: str, options: dict[str, Any]) -> None:
        timeout = seconds("WORKER_TIMEOUT")
        store = Store(using)
        local = liveness.judge_local(store.workers_on_host(liveness.this_host()))
        results = store.recover(timeout=timeout, dead_workers=local.dead, alive_workers=local.alive)
        for result in results:
            job = result.job
            if job is None:
                continue
            detail = f" ({job.failure_reason})" if job.failure_reason else ""
            self.stdout.write(
                f"{job.job_id}: {result.status} -> {job.outcome or job.state}{detail}"
            )
        self.stdout.write(
            f"{len(results)} disappeared claims reconciled "
            f"(workers silent for more than {ago(timeout)})"
        )

    def prune(self, using: str, options: dict[str, Any]) -> None:
        from ...models import Job

        age = options["older_than"] or retention()
        if age is None:
            raise CommandError(
                "prune needs --older-than AGE (e.g. 30d) or WATCHDOG['RETENTION'] set"
            )
        now = timezone.now()
        older = f"settled more than {ago(age.total_seconds())} ago"
        count = _how_many(
            Job.objects.using(using).filter(state="settled", settled_at__lt=now - age)
        )
        if count == "0":
            self.stdout.write(f"no jobs {older}: nothing changed")
            return
        if not self._confirm(options, f"Delete {count} settled jobs {older}?"):
            return
        store = Store(using)
        total = 0
        for deleted in store.prune_batches(
            older_than=age, now=now, batch_size=options["batch_size"]
        ):
            total += deleted
            self.stdout.write(f"deleted {deleted} jobs ({total} so far)")
        self.stdout.write(f"{total} settled jobs pruned")
        forgotten = 0
        while (batch := store.forget_idle_task_queues()) > 0:
            forgotten += batch
        if forgotten:
            self.stdout.write(f"{forgotten} idle task queues forgotten")

    # -- confirmation --------------------------------------------------------------------

    def _confirm(self, options: dict[str, Any], question: str) -> bool:
        """Whether to go ahead: ``--yes``, or "y" typed on a terminal.

        ``question`` says how many jobs will change. Without ``--yes`` and without a terminal
        to ask on, refuse (a ``CommandError``: exit 1). Any answer but yes prints "nothing
        changed" and returns ``False``: the caller changes nothing and the command exits 0.
        """
        if options.get("yes"):
            return True
        if not _is_tty(self.stdin):
            raise CommandError(
                f"{question} Not confirmed: pass --yes to run without a terminal to ask on."
            )
        self.stdout.write(f"{question} [y/N] ", ending="")
        self.stdout.flush()
        answer = self.stdin.readline().strip().lower()
        if answer in ("y", "yes"):
            return True
        self.stdout.write("not confirmed: nothing changed")
        return False


def requester() -> str:
    """Who runs this command, as recorded on the jobs it changes: ``cli:<OS user>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (a bare container)
        user = f"uid {os.getuid()}"
    return f"cli:{user}"[: reruns.REQUESTER_MAX]


def _how_many(jobs: QuerySet[Any]) -> str:
    """``jobs`` counted up to ``PRUNE_COUNT_LIMIT``; past it the planner's estimate
    ("about N") or, without one, "more than N": the count reads at most that many rows."""
    counted = estimates.bounded_count(jobs, PRUNE_COUNT_LIMIT)
    if counted <= PRUNE_COUNT_LIMIT:
        return str(counted)
    estimate = estimates.planner_estimate(jobs)
    if estimate is None:
        return f"more than {PRUNE_COUNT_LIMIT}"
    return f"about {max(estimate, counted)}"


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
