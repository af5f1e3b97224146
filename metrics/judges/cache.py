"""A persistent, content-addressed judgement cache in an embedded SQLite file.

The key is the SHA-256 of everything that determines a judgement: the kind of
judgement and its prompt version, the model, the sampling parameters and exactly the
inputs the judgement reads. Each answer is committed as soon as it arrives, so a run
killed half-way and started again re-sends nothing it had finished.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any


def cache_key(**parts: Any) -> str:
    """SHA-256 of the canonical JSON of ``parts`` (sorted keys, no whitespace)."""
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class JudgementCache:
    """``get``/``put`` of JSON values by key, in SQLite (WAL mode, safe across threads).

    Parameters
    ----------
    path : str or Path
        The database file; its folder is created. ``":memory:"`` keeps it in memory.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # durable at each commit in WAL mode, no fsync per write
        self._db.execute("CREATE TABLE IF NOT EXISTS judgements (key TEXT PRIMARY KEY, kind TEXT NOT NULL, "
                         "value TEXT NOT NULL, created TEXT DEFAULT CURRENT_TIMESTAMP)")

    def get(self, key: str) -> Any | None:
        """The stored value, or ``None`` (also for an entry that no longer decodes)."""
        with self._lock:
            row = self._db.execute("SELECT value FROM judgements WHERE key = ?", (key,)).fetchone()
        try:
            return json.loads(row[0]) if row else None
        except (json.JSONDecodeError, TypeError):
            return None  # a damaged entry is a miss: the judgement is asked again and rewritten

    def put(self, key: str, kind: str, value: Any) -> None:
        """Store ``value`` (JSON-serialisable) under ``key``, committed at once."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO judgements (key, kind, value) VALUES (?, ?, ?)",
                             (key, kind, json.dumps(value, ensure_ascii=False)))

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM judgements").fetchone()[0]
