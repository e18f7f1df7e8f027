"""``FileChanges``: a waiting thread sleeps until a watched file is written (Linux inotify)."""

import sys
import threading

import pytest

from django_watchdog.engine.file_changes import FileChanges

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")


@pytest.fixture
def watched(tmp_path):
    database = tmp_path / "db.sqlite3"
    changes = FileChanges.watch([database, f"{database}-wal"])
    assert changes is not None
    yield changes, database
    changes.close()


def test_a_write_to_a_watched_file_ends_the_wait(watched) -> None:
    changes, database = watched
    with open(f"{database}-wal", "ab") as wal:  # created after the watch began
        wal.write(b"frame")
    assert changes.wait(30)


def test_nothing_written_waits_out_the_timeout(watched) -> None:
    changes, _ = watched
    assert not changes.wait(0.01)


def test_a_write_to_another_file_in_the_directory_does_not_count(watched) -> None:
    changes, database = watched
    (database.parent / "other.txt").write_text("noise")
    assert not changes.wait(0.01)


def test_interrupt_ends_a_wait_from_another_thread(watched) -> None:
    changes, _ = watched
    waiting = threading.Event()
    result: list[bool] = []

    def wait() -> None:
        waiting.set()
        result.append(changes.wait(60))

    thread = threading.Thread(target=wait)
    thread.start()
    assert waiting.wait(30)
    changes.interrupt()
    thread.join(30)
    assert result == [False]


def test_interrupt_after_close_is_harmless(tmp_path) -> None:
    changes = FileChanges.watch([tmp_path / "db"])
    assert changes is not None
    changes.close()
    changes.interrupt()
