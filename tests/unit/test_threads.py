"""Job threads stay for the next job (keeping their connection); a stuck one is replaced."""

import threading

from django_watchdog.engine.threads import JobThreads


def test_an_idle_thread_takes_the_next_job_and_a_busy_one_gets_company():
    exits = []
    threads = JobThreads(on_exit=lambda: exits.append(threading.get_ident()))
    ran: list[int] = []
    done = threading.Semaphore(0)

    def record(_):
        ran.append(threading.get_ident())
        done.release()

    threads.submit(record, None)
    assert done.acquire(timeout=5)
    for _ in range(3):
        # Wait until the thread is idle again, then hand it the next job.
        while not threads._idle:
            threading.Event().wait(0.001)
        threads.submit(record, None)
        assert done.acquire(timeout=5)
    assert len(set(ran)) == 1, "one thread ran all four jobs"

    stuck = threading.Event()
    while not threads._idle:
        threading.Event().wait(0.001)
    threads.submit(lambda _: stuck.wait(5), None)  # the idle thread gets stuck
    threads.submit(record, None)  # nobody idle: a second thread starts
    assert done.acquire(timeout=5)
    assert ran[-1] != ran[0]
    stuck.set()
    threads.stop()
    deadline = threading.Event()
    for _ in range(500):
        if len(exits) == 2:
            break
        deadline.wait(0.01)
    assert len(exits) == 2, "both threads ended and released their connections"
