from django.apps import AppConfig


class WatchdogConfig(AppConfig):
    name = "django_watchdog"
    label = "django_watchdog"
    verbose_name = "Watchdog jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks, handlers

        checks.register()
        handlers.autodiscover()
