"""The command's Dagster instance: where it lives (:func:`dagster_home`), opening it once per command
(:func:`prepare_instance`), and its settings' errors said in one line with no password
(:func:`instance_settings`)."""
from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
from pathlib import Path


def dagster_home() -> Path:
    """The folder of the command's Dagster instance: ``$DAGSTER_HOME`` when set, else the project-local
    ``dagster_home/`` (of the working directory), as an absolute path."""
    return Path(os.environ.get("DAGSTER_HOME") or "dagster_home").expanduser().resolve()


def prepare_instance():
    """The command's Dagster instance, in :func:`dagster_home` (opened from that folder: the process's
    environment is left as it is); an instance folder without ``dagster.yaml`` gets a copy of the
    project's. Its storage is created by one process at a time (two first runs at once would race on it).
    Created once per command (each creation opens its storages) and handed to the
    command as ``args.instance``."""
    import fcntl

    from dagster import DagsterInstance

    home = dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".rag-eval-setup.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        template = Path(__file__).resolve().parent.parent / "dagster_home" / "dagster.yaml"
        if not (home / "dagster.yaml").exists() and template.exists():
            shutil.copyfile(template, home / "dagster.yaml")
        with instance_settings(home):
            instance = DagsterInstance.from_config(str(home))
            ready = home / ".rag-eval-storage-ready"
            if not ready.exists():  # first use, or a first use killed while Dagster created its tables
                _complete_storage(instance)
                ready.touch()
    return instance


@contextlib.contextmanager
def instance_settings(home: Path):
    """Say in one line what is wrong with the settings of the instance in ``home``: its
    ``dagster.yaml`` (a variable it reads that is not set, an invalid value) or the database it
    names (a URL that is not one, a server that refuses the connection or the password, after
    Dagster's retries), as a ``SettingsError`` naming the file; the password is never shown."""
    import dagster as dg
    from sqlalchemy.exc import SQLAlchemyError

    from rag_eval.metrics.errors import SettingsError

    where = home / "dagster.yaml"
    retries = _Retries()  # dagster-postgres' warnings as it retries a connection: counted, not printed
    logging.getLogger().addHandler(retries)
    try:
        yield
    except dg.DagsterInvalidConfigError as exc:
        unset = re.search(r'environment variable "([^"]+)" which is not set', str(exc))
        why = f"it reads the environment variable {unset.group(1)}, which is not set" if unset else \
            next((e.message for e in exc.errors), str(exc)).splitlines()[0]
        raise SettingsError(_hidden(f"the Dagster instance {where}: {why}")) from None
    except ImportError as exc:  # the URL names a database driver that is not installed
        raise SettingsError(_hidden(f"the Dagster instance {where}: its database URL needs the driver {exc.name}, which "
                                    "is not installed") + ": for PostgreSQL write postgresql+psycopg2://USER:PASSWORD@HOST"
                                                          "/DB (the postgres extra installs psycopg2)") from None
    except ValueError as exc:  # a URL SQLAlchemy parsed, with a part it cannot read (a port that is no number)
        raise SettingsError(_hidden(f"the Dagster instance {where}: its database URL cannot be read: {exc}")) from None
    except Exception as exc:  # the database's error, also wrapped (dagster-postgres' retries)
        chain = [exc, *_causes(exc)]
        database = next((e for e in chain if isinstance(e, SQLAlchemyError)), None)
        if database is None or type(getattr(database, "orig", None)).__module__ == "sqlite3":
            raise  # not the database's, or the SQLite files of the folder (rag_eval.orchestration.cli says what to do)
        cause = str(getattr(database, "orig", None) or database).strip().splitlines()
        why = next((line.strip() for line in cause if "FATAL" in line or "error" in line.lower()), cause[0] if cause
                   else type(exc).__name__)
        tries = f" (after {retries.count + 1} attempts)" if retries.count else ""
        raise SettingsError(_hidden(f"the Dagster instance {where}: its database cannot be used{tries}: {why} (check "
                                    "the URL it reads, e.g. $DAGSTER_POSTGRES_URL, its password and the server)")) from None
    finally:
        logging.getLogger().removeHandler(retries)


class _Retries(logging.Handler):
    """Counts the root logger's records of retried database connections instead of printing them (the
    others are printed as Python would print them)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "Retrying failed database connection" in record.getMessage():
            self.count += 1
        elif logging.lastResort is not None:
            logging.lastResort.handle(record)


def _causes(exc: BaseException):
    """What ``exc`` was raised from, and so on down."""
    cause = exc.__cause__ or exc.__context__
    while cause is not None:
        yield cause
        cause = cause.__cause__ or cause.__context__


def _hidden(text: str) -> str:
    """``text`` with the password of any URL in it (``scheme://user:PASSWORD@host``), the passwords of the URLs in
    the environment (each part of one holding an unescaped ``@`` too: a driver reads what follows as the host)
    and the values of secret variables redacted."""
    from rag_eval.metrics.errors import redacted

    for value in os.environ.values():
        userinfo = value.split("://", 1)[1].rpartition("@")[0] if "://" in value else ""
        password = userinfo.partition(":")[2]
        for part in sorted({password, *password.split("@")}, key=len, reverse=True):
            if len(part) >= 2:
                text = text.replace(part, "[redacted]")
    return redacted(re.sub(r"(://[^:/@\s]*:)[^@\s]+@", r"\1[redacted]@", text))


def _complete_storage(instance) -> None:
    """Finish what Dagster does when it creates an instance's storage: a process killed in the
    middle leaves e.g. an empty event-log index that Dagster takes as created (the next run then
    fails: "requires the dynamic partitions table"). ``upgrade`` is ``dagster instance migrate``
    (missing tables created, schema stamped, data migrations marked) and ``reindex`` the
    secondary indexes a fresh storage marks; both are no-ops on a complete storage. Dagster's
    own progress lines go nowhere."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        instance.upgrade()
        instance.reindex()
