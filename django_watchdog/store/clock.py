"""The database's clock as ORM expressions: stamp or compare a datetime column with it."""

from __future__ import annotations

from typing import Any

from django.db.models import DateTimeField, FloatField, Func, Value


class DatabaseClock(Func):
    """The database's clock (``Dialect.NOW``), ``seconds_ago`` seconds back: an expression to
    stamp or compare a datetime column with. On SQLite it is the text ``NOW`` writes, which
    orders as the ORM's own text does."""

    output_field = DateTimeField()
    template = "clock_timestamp() - make_interval(secs => %(expressions)s)"

    def __init__(self, seconds_ago: float = 0.0) -> None:
        super().__init__(Value(float(seconds_ago), output_field=FloatField()))

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = (
            "strftime('%%%%Y-%%%%m-%%%%d %%%%H:%%%%M:%%%%f', 'now', "
            "printf('-%%%%.6f seconds', %(expressions)s))"
        )
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_mysql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        """MariaDB: UTC whatever the session's time zone (``NOW(6)`` follows it)."""
        template = "UTC_TIMESTAMP(6) - INTERVAL ROUND(%(expressions)s * 1000000) MICROSECOND"
        return self.as_sql(compiler, connection, template=template, **extra)


class SecondsSince(Func):
    """Seconds from a datetime column (or expression) to the database's clock: a float."""

    output_field = FloatField()
    template = "EXTRACT(EPOCH FROM clock_timestamp() - %(expressions)s)::float8"

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "(julianday('now') - julianday(%(expressions)s)) * 86400.0"
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_mysql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "TIMESTAMPDIFF(MICROSECOND, %(expressions)s, UTC_TIMESTAMP(6)) / 1000000.0"
        return self.as_sql(compiler, connection, template=template, **extra)
