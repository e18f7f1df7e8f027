from typing import Any

from django.apps import AppConfig


class WatchdogConfig(AppConfig):
    name = "django_watchdog"
    label = "django_watchdog"
    verbose_name = "Watchdog jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_migrate

        from . import checks, handlers
        from .store.timestamps import install_lenient_loader

        checks.register()
        post_migrate.connect(
            build_unmigrated, sender=self, dispatch_uid="django_watchdog.build_unmigrated"
        )
        connection_created.connect(
            install_lenient_loader, dispatch_uid="django_watchdog.lenient_timestamps"
        )
        handlers.autodiscover()
        # After autodiscovery, so a lane claimed by a jobs.py handler is left to it (and to
        # the backend's system check, which reports the clash).
        from .tasks.registration import register_lane_handlers

        register_lane_handlers()


def build_unmigrated(sender: AppConfig, using: str, **kwargs: Any) -> None:
    """After ``migrate`` built watchdog's tables from the models (its migrations disabled,
    as pytest-django's ``--nomigrations`` does), add what only a migration makes and the
    store needs (on MariaDB, the job id sequence of migration 0011)."""
    from django.db import connections
    from django.db.migrations.loader import MigrationLoader

    from .store.dialects import dialect_class

    module, _ = MigrationLoader.migrations_module(sender.label)
    cls = dialect_class(connections[using])
    if module is None and cls is not None:
        cls(using).build_unmigrated()
