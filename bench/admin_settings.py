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
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
ROOT_URLCONF = "bench.benchapp.urls"
ALLOWED_HOSTS = ["testserver"]  # Django's test client
