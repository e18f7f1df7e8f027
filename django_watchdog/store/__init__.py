"""The only code that writes watchdog rows: one module per group of verbs."""
