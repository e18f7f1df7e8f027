"""The benchmark of issue 5: watchdog, its peers and a raw floor, side by side (see README.md)."""
