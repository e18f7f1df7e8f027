"""Procrastinate on its own PostgreSQL database (bench_procrastinate, plus BENCH_DB_SUFFIX as
bench.bench names it; on PGHOST:PGPORT as bench.bench), psycopg 3 connector."""

import os

from procrastinate import App, PsycopgConnector

from ..stamp import stamp

DSN = os.environ.get(
    "BENCH_PROCRASTINATE_DSN",
    f"postgresql://postgres@{os.environ.get('PGHOST', '127.0.0.1')}:"
    f"{os.environ.get('PGPORT', '5432')}/bench_procrastinate"
    + os.environ.get("BENCH_DB_SUFFIX", ""),
)

app = App(connector=PsycopgConnector(conninfo=DSN))


@app.task(name="noop")
def noop(t: str) -> None:
    stamp(t)
