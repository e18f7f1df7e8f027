from django.apps import AppConfig


class HomeConfig(AppConfig):
    name = "home"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from home import race

        race.install()
