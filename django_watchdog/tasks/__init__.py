"""The ``django.tasks`` backend (Django 6+): ``@task`` functions run as watchdog jobs.

``backend`` holds ``WatchdogBackend`` and the ``enqueue_task`` helper, ``mapping`` turns a
task call into a job and a job row back into a ``TaskResult``, ``runner`` is the lane handler
the worker calls, ``registration`` registers it for the backends' lanes at start-up. Only
``registration`` is safe to import on Django versions without ``django.tasks``.
"""
