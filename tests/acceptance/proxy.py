"""A loopback TCP proxy whose connections a test can cut, to simulate a network failure,
and how a worker subprocess is pointed through it at the database server under test."""

import socket
import threading

from django.db import connection

#: Per server (Django's vendor): its default port, and the environment variables through
#: which tests/settings.py takes a worker's host and port.
SERVERS = {
    "postgresql": (5432, "PGHOST", "PGPORT"),
    "mysql": (3306, "MARIADB_HOST", "MARIADB_PORT"),
}


def server_address() -> tuple[str, int]:
    """(host, port) of the test database's server (PostgreSQL or MariaDB, over TCP)."""
    default_port, _, _ = SERVERS[connection.vendor]
    settings = connection.settings_dict
    return settings["HOST"] or "127.0.0.1", int(settings["PORT"] or default_port)


def reaching(host: str, port: int) -> dict[str, str]:
    """The environment that makes a worker subprocess reach the server at ``host``:``port``."""
    _, host_variable, port_variable = SERVERS[connection.vendor]
    return {host_variable: host, port_variable: str(port)}


class CuttableProxy:
    """Forward ``host``:<port> to ``target``; ``cut()`` drops every open connection."""

    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1"):
        self.target = target
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                self._drop(end)

    def _drop(self, end):
        with self._lock:
            self._sockets.discard(end)
        try:
            end.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        end.close()

    def cut(self):
        """Drop every connection now (new ones are still accepted)."""
        self.cuts += 1
        with self._lock:
            open_sockets = list(self._sockets)
        for end in open_sockets:
            self._drop(end)

    def close(self):
        self._closed = True
        self.listener.close()
        self.cut()
