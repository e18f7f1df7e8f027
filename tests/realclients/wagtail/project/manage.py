#!/usr/bin/env python
"""The Wagtail site of the real-client test (settings from the environment: settings.py)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "wagtailsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
