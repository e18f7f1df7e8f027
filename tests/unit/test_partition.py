"""A worker's lane partition: held as tuples whatever it was given, so what a claim derives
from it (its lane terms, the lanes its settles need not wake) is made once per partition."""

from __future__ import annotations

from django_watchdog.store import claims
from django_watchdog.store.claims import Partition
from django_watchdog.store.dialects import QuietLanes


def test_a_partition_given_lists_holds_tuples_and_equals_one_given_tuples() -> None:
    given = Partition(lanes=["mail", "sms"], exclude_lanes=["bulk"])
    assert given.lanes == ("mail", "sms") and given.exclude_lanes == ("bulk",)
    assert given == Partition(lanes=("mail", "sms"), exclude_lanes=("bulk",))
    assert hash(given) == hash(Partition(lanes=("mail", "sms"), exclude_lanes=("bulk",)))


def test_what_a_claim_derives_from_a_partition_is_that_partitions() -> None:
    mail, every_lane_but_bulk = Partition(lanes=["mail"]), Partition(exclude_lanes=["bulk"])
    assert claims.quiet_lanes(mail) == QuietLanes(only=("mail",))
    assert claims.quiet_lanes(every_lane_but_bulk) == QuietLanes(every_lane_but=("bulk",))
    assert claims.quiet_lanes(None) == QuietLanes()
    assert dict(claims._lanes(mail)[1]) == {"lane_0": "mail"}
    assert dict(claims._lanes(every_lane_but_bulk)[1]) == {"exclude_lane_0": "bulk"}
