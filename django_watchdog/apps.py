from django.apps import AppConfig


class WatchdogConfig(AppConfig):
    name = "django_watchdog"
    label = "django_watchdog"
    verbose_name = "Watchdog jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from . import checks, handlers
        from .store.timestamps import install_lenient_loader

        checks.register()
        connection_created.connect(
            install_lenient_loader, dispatch_uid="django_watchdog.lenient_timestamps"
        )
        handlers.autodiscover()
        # After autodiscovery, so a lane claimed by a jobs.py handler is left to it (and to
        # the backend's system check, which reports the clash).
        from .tasks.registration import register_lane_handlers

        register_lane_handlers()
