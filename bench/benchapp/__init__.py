"""The benchmark's job handlers (watchdog) and task functions (django.tasks)."""
