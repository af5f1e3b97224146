"""A PostgreSQL server of the tests' own: a new cluster (``initdb``) in a temporary folder, started
with ``pg_ctl`` on a free port of 127.0.0.1, password authentication, stopped and removed by
:meth:`PostgresServer.stop`. The Debian package's binaries (``.ci/run`` installs ``postgresql``);
as root, the cluster runs as the package's ``postgres`` user (PostgreSQL refuses root)."""
import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def binaries() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``: on PATH, else the newest Debian package's."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(folders[-1]).parent if folders else None


class PostgresServer:
    """``start()`` gives the server; ``url`` (``postgresql+psycopg2://rag_eval:<password>@127.0.0.1:<port>/dagster``)
    and ``password`` (random) to reach its database ``dagster``."""

    def __init__(self) -> None:
        self.bin = binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="rag-eval-pg-"))
        self.password = secrets.token_hex(16)
        self.port = 0
        self.started = False

    def _run(self, *command: str) -> subprocess.CompletedProcess:
        user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        done = subprocess.run([*user, *command], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{command[0]}: {done.stdout[-1500:]}{done.stderr[-1500:]}"
        return done

    def start(self) -> "PostgresServer":
        assert self.bin is not None, "PostgreSQL is not installed (apt-get install postgresql; .ci/run does)"
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        password_file = self.folder / "password"
        password_file.write_text(self.password + "\n", encoding="utf-8")
        if os.geteuid() == 0:
            shutil.chown(password_file, "postgres", "postgres")
        data = self.folder / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", "rag_eval", f"--pwfile={password_file}",
                  "--auth=scram-sha-256", "-E", "UTF8", "--no-instructions")
        password_file.unlink()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(self.folder / "server.log"),
                  "-w", "-t", "60", "start")
        self.started = True
        import psycopg2

        connection = psycopg2.connect(host="127.0.0.1", port=self.port, user="rag_eval", password=self.password,
                                      dbname="postgres")
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute("create database dagster")
        connection.close()
        return self

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://rag_eval:{self.password}@127.0.0.1:{self.port}/dagster"

    def stop(self) -> None:
        if self.started:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop")
            self.started = False
        shutil.rmtree(self.folder, ignore_errors=True)
