"""A project where an app imports its tasks at start-up, as Wagtail does (``settings.py``)."""
