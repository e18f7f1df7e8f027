"""Procrastinate on its own PostgreSQL database (bench_procrastinate), psycopg 3 connector."""

import os

from procrastinate import App, PsycopgConnector

from ..stamp import stamp

DSN = os.environ.get(
    "BENCH_PROCRASTINATE_DSN", "postgresql://postgres@127.0.0.1:5432/bench_procrastinate"
)

app = App(connector=PsycopgConnector(conninfo=DSN))


@app.task(name="noop")
def noop(t: str) -> None:
    stamp(t)
