"""Pure values and rules of django-watchdog: no Django import, no database."""
