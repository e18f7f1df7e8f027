"""The worker: claim loop, liveness, recovery, wake-up and shutdown, on top of the store's verbs."""
