"""A small filesystem for the storage-fault tests: a real tmpfs of a few megabytes.

It is mounted in a private mount namespace (``unshare -m``: root, and CI's root inside
``unshare -rn``; ``unshare -rm`` in a user namespace for anyone else), which a holder
process keeps alive; nothing is mounted where the rest of the machine sees it. Commands
that write to it run inside that namespace (``nsenter``), at the same paths as outside;
the test reads plain files through ``/proc/<holder>/root`` (never SQLite or DuckDB files:
SQLite resolves that link and would open the path outside). ``fill`` takes every free
byte (a filler file; ``free`` deletes it), ``read_only``/``writable`` remount it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

_HOLDER = 'mount -t tmpfs -o size="$2" tmpfs "$1" && echo ready || exit 1\n' \
          'while read -r option; do mount -o "remount,$option" "$1" && echo ok || echo failed; done\n'


class SmallDisk:
    """A tmpfs of ``size`` (``"4m"``) at ``mountpoint`` (an empty folder) in a namespace of its own."""

    def __init__(self, mountpoint: Path, size: str) -> None:
        self.root, self.size = Path(mountpoint), size
        self.root.mkdir(parents=True, exist_ok=True)
        self.user_namespace = os.geteuid() != 0
        if not shutil.which("unshare") or not shutil.which("nsenter"):
            pytest.skip("no tmpfs for the storage-fault tests: unshare/nsenter (util-linux) are not installed")
        command = ["unshare", "-rm" if self.user_namespace else "-m", "--propagation", "private",
                   "sh", "-c", _HOLDER, "holder", str(self.root), size]
        self.holder = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
        if self.holder.stdout.readline().strip() != "ready":
            error = self.holder.stderr.read().strip()
            self.holder.wait(timeout=10)
            pytest.skip(f"no tmpfs can be mounted here ({error}): the storage-fault tests need one")

    def enter(self, cwd: Path | None = None) -> list[str]:
        """The command prefix running a program inside the namespace (in ``cwd``)."""
        prefix = ["nsenter", "-t", str(self.holder.pid), "-m"]
        if self.user_namespace:
            prefix += ["-U", "--preserve-credentials"]
        return prefix + ([f"--wd={cwd}"] if cwd else [])

    def run(self, args: list[str], cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
        """``args`` inside the namespace, in ``cwd``; output captured as text."""
        return subprocess.run(self.enter(cwd) + args, env=env, capture_output=True, text=True, timeout=timeout)

    def view(self, path: Path | str) -> Path:
        """``path`` on the small disk as the test process reads it (plain files only)."""
        return Path(f"/proc/{self.holder.pid}/root{Path(path).resolve()}")

    def fill(self) -> None:
        """Take every free byte of the disk."""
        with open(self.view(self.root / ".filler"), "ab", buffering=0) as filler:
            for block in (1 << 20, 1 << 12, 1):
                try:
                    while filler.write(b"\0" * block):
                        pass
                except OSError:
                    continue

    def free(self) -> None:
        """Give the filler's space back."""
        self.view(self.root / ".filler").unlink(missing_ok=True)

    def _remount(self, option: str) -> None:
        self.holder.stdin.write(option + "\n")
        self.holder.stdin.flush()
        assert self.holder.stdout.readline().strip() == "ok", f"remount {option} failed"

    def read_only(self) -> None:
        self._remount("ro")

    def writable(self) -> None:
        self._remount("rw")

    def stop(self) -> None:
        if self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait(timeout=10)
        for stream in (self.holder.stdin, self.holder.stdout, self.holder.stderr):
            stream.close()
