from django.apps import AppConfig


class EarlyConfig(AppConfig):
    """Imports its task module in ready(), as Wagtail's apps do, building the backend."""

    name = "tests.tasks_order.early"
    label = "tasks_order_early"

    def ready(self) -> None:
        from . import tasks  # noqa: F401
