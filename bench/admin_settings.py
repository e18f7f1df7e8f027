"""bench.settings with Django's admin, for timing watchdog's admin pages on the benchmark's
tables (bench/reads.py). Only the driver's read-timing op uses it: the workers measured
run on bench.settings, without the admin's apps loaded."""

from bench.settings import *  # noqa: F403
from bench.settings import INSTALLED_APPS

INSTALLED_APPS = [
    *INSTALLED_APPS,
    "django.contrib.admin",
    "django.contrib.sessions",
    "django.contrib.messages",
]
# What the admin's system checks require, no more (migrate runs them).
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
CONTEXT_PROCESSORS = ["auth", "messages"]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                f"django.contrib.{name}.context_processors.{name}" for name in CONTEXT_PROCESSORS
            ]
        },
    }
]
SILENCED_SYSTEM_CHECKS = ["admin.W411"]  # the request context processor: for the sidebar
ROOT_URLCONF = "bench.benchapp.urls"
ALLOWED_HOSTS = ["testserver"]  # Django's test client
