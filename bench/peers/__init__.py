"""Peer systems' apps: Procrastinate and Celery, with the same no-op job."""
