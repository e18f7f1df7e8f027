"""A JSON field that refuses to hand back text it cannot decode."""

from __future__ import annotations

import json
from typing import Any

from django.db import models

from .domain.as_stored import as_stored
from .domain.errors import WatchdogError


class StrictJSONField(models.JSONField):
    """Django's JSONField returns undecodable text as a str; this one raises instead.

    A row edited by hand must surface as ``WatchdogError(kind="store_unavailable")``,
    never as a payload silently turned into a string (but inside
    ``store.as_stored.reading_as_stored()``, where it loads as that text).
    """

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None or not isinstance(value, str | bytes | bytearray):
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            if as_stored():
                return value
            raise WatchdogError(
                f"column {self.attname!r} holds text that is not JSON: {error}",
                kind="store_unavailable",
            ) from error
