"""A private PostgreSQL server for the tests: Debian's ``postgresql`` package, a cluster made by
``initdb`` in a temporary folder and started by ``pg_ctl`` on a free 127.0.0.1 port.

PostgreSQL refuses to run as root, and the tests run as root in CI (``unshare -rn`` maps the
user to root): there, ``initdb``, ``pg_ctl`` and the server run in a user namespace of their
own where that user is ``nobody`` (``unshare --user --map-user=65534``), which needs no
other account and shares the tests' network namespace (loopback only). ``.ci/run`` installs
the package when it is absent; without it the tests that need the server are skipped with
the reason. The superuser ``postgres`` connects without a password; :meth:`PostgresServer.database`
makes a database whose owner needs its password, for the tests that check where it ends up.
"""
from __future__ import annotations

import glob
import itertools
import os
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


def _binary(name: str) -> str | None:
    """A PostgreSQL program: on PATH, else in Debian's /usr/lib/postgresql/<version>/bin (newest)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return found[-1] if found else shutil.which(name)


def available() -> str | None:
    """Why no server can be started here, or ``None`` when one can."""
    missing = [name for name in ("initdb", "pg_ctl", "postgres") if _binary(name) is None]
    if missing:
        return f"PostgreSQL is not installed ({', '.join(missing)} not found; apt-get install postgresql)"
    if os.geteuid() == 0 and shutil.which("unshare") is None:
        return "running as root without unshare: PostgreSQL refuses to run as root"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class Database:
    """A database of the server: ``url`` (SQLAlchemy form, with the password) and ``password``."""

    url: str
    password: str


#: Trust for the superuser, a password (scram-sha-256) for every other role; 127.0.0.1 only.
HBA = """local all all trust
host all postgres 127.0.0.1/32 trust
host all all 127.0.0.1/32 scram-sha-256
"""


class PostgresServer:
    """A cluster in ``folder`` (superuser ``postgres`` without a password, on 127.0.0.1 only,
    UTF-8, fsync off); :attr:`url` is its SQLAlchemy URL for the database ``postgres``."""

    _numbers = itertools.count(1)

    def __init__(self, folder: Path) -> None:
        self.folder, self.data, self.port = Path(folder), Path(folder) / "data", _free_port()
        self.url = f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        command = [_binary(name), *args]
        if os.geteuid() == 0:
            command = ["unshare", "--user", "--map-user=65534", "--map-group=65534", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            log = self.folder / "server.log"
            raise RuntimeError(f"{name} failed ({done.returncode}): {done.stderr[-2000:]}"
                               + (f"\n{log.read_text()[-2000:]}" if log.exists() else ""))
        return done

    def start(self) -> PostgresServer:
        """Make the cluster and start the server; returns once it accepts connections."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                  "--locale=C", "--no-sync")
        (self.data / "pg_hba.conf").write_text(HBA, encoding="utf-8")
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off " \
                  "-c synchronous_commit=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-o", options, "-w",
                  "-t", "60", "start")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"PostgreSQL did not accept connections on 127.0.0.1:{self.port}")

    def stop(self) -> None:
        """Stop the server (fast shutdown) and leave the folder to its owner."""
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def database(self) -> Database:
        """A new database (``db_1``, ``db_2``...) owned by a new role of the same name with a
        random password, which 127.0.0.1 connections must give."""
        import psycopg2
        from psycopg2 import sql

        name, password = f"db_{next(self._numbers)}", secrets.token_hex(16)
        connection = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres")
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(sql.SQL("create role {} login password %s").format(sql.Identifier(name)), (password,))
            cursor.execute(sql.SQL("create database {0} owner {0}").format(sql.Identifier(name)))
        connection.close()
        return Database(f"postgresql+psycopg2://{name}:{password}@127.0.0.1:{self.port}/{name}", password)
