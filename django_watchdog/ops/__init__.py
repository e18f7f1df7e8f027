"""What ``manage.py watchdog`` does: the status snapshot, its tables, operator actions."""
