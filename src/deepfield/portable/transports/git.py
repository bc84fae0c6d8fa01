"""Git repositories: ``git+URL-or-path[#ref]`` read through the git command line.

The repository is fetched into a bare mirror in the transport's workdir (one ref, kept as
``refs/deepfield/head``; later refreshes fetch only new objects). Files are the blobs at the
tree's root; version tokens are blob ids and timestamps the committer date of the last commit
touching each file (spec, "Git": never mtime), found in one walk of the history that stops as
soon as every file is dated. Contents come out through one ``git cat-file --batch``.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

from ...errors import RemoteUnavailableError, RemoteUnreachableError, TransportError
from ...httpjson import display_url
from .base import MAX_FILE_BYTES, RemoteFile, Transport, listed_name

HEAD_REF = "refs/deepfield/head"
GIT_TIMEOUT = 300
_DATE_LINE = re.compile(r"^@(\d+)$")


_UNREACHABLE = re.compile(
    r"could not resolve host|connection refused|connection timed out|failed to connect|"
    r"unable to access|could not read from remote|network is unreachable|timed out",
    re.IGNORECASE,
)


class GitTransport(Transport):
    name = "git"

    def __init__(self, source: str, workdir: Path, pin: str | None = None) -> None:
        super().__init__(source, workdir, pin)
        url, _, ref = source.removeprefix("git+").partition("#")
        if not url or url.startswith("-") or ref.startswith("-"):
            raise TransportError(f"{source!r} is not a git source", "write git+URL[#ref]")
        self.url = url
        self.shown_url = display_url(url)  # git still gets the credentials
        self.ref = ref or "HEAD"
        self._label = f"git+{self.shown_url}" + (f"#{ref}" if ref else "")
        self.mirror = workdir / "mirror.git"
        self._blobs: dict[str, tuple[str, int]] = {}

    @property
    def label(self) -> str:
        return self._label

    def field_name(self) -> str:
        from ...page import is_valid_name, slugify

        stem = self.url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".git")
        return stem if is_valid_name(stem) else slugify(stem) or "field"

    def _git(self, *args: str, stdin: bytes | None = None) -> bytes:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
        try:
            done = subprocess.run(
                ["git", "-c", "core.quotePath=false", "--git-dir", str(self.mirror), *args],
                input=stdin, capture_output=True, timeout=GIT_TIMEOUT, env=env, check=False,
            )
        except FileNotFoundError:
            raise TransportError("reading git+ fields needs the git command",
                                 "install git and put it on PATH") from None
        except subprocess.TimeoutExpired:
            raise RemoteUnreachableError(
                f"git {args[0]} timed out for {self.shown_url}") from None
        if done.returncode != 0:
            lines = [ln.strip() for ln in done.stderr.decode("utf-8", "replace").splitlines()
                     if ln.strip()]
            # git's first fatal line says what went wrong; later ones are advice fragments
            # ("and the repository exists.").
            fatal = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
            why = (fatal[0].split(":", 1)[1].strip() if fatal else lines[-1] if lines
                   else f"exit status {done.returncode}")
            why = why.replace(self.url, self.shown_url)  # git quotes the URL it was given
            # A network failure (not a wrong repository or ref) lets open_remote fall back
            # on the cached mirror.
            error = RemoteUnreachableError if _UNREACHABLE.search(why) else \
                RemoteUnavailableError
            raise error(
                f"cannot read git repository {self.shown_url} at {self.ref}: {why}",
                "check that it is a git repository (and the ref exists) and that git can reach it",
            )
        return done.stdout

    def _update_mirror(self) -> None:
        if not (self.mirror / "HEAD").exists():
            self.mirror.mkdir(parents=True, exist_ok=True)
            self._git("init", "--bare", "--quiet")
        self._git("fetch", "--quiet", "--no-tags", "--force", self.url, f"+{self.ref}:{HEAD_REF}")

    def list_files(self) -> list[RemoteFile]:
        self._update_mirror()
        self._blobs = {}
        for record in self._git("ls-tree", "-z", "-l", HEAD_REF).split(b"\0"):
            if not record:
                continue
            meta, _, raw_name = record.partition(b"\t")
            mode, kind, sha, size = meta.decode().split()
            if kind != "blob" or mode not in ("100644", "100755"):
                continue  # symlinks, submodules and folders are never fetched
            name = listed_name(raw_name.decode("utf-8", "replace"), self.shown_url)
            if name is not None:
                self._blobs[name] = (sha, int(size))
        dates = self._commit_dates(set(self._blobs))
        return [RemoteFile(name, size, dates.get(name), sha)
                for name, (sha, size) in sorted(self._blobs.items())]

    def _commit_dates(self, names: set[str]) -> dict[str, float]:
        """Committer date of the newest commit touching each root file (one history walk)."""
        dates: dict[str, float] = {}
        if not names:
            return dates
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
        command = ["git", "-c", "core.quotePath=false", "--git-dir", str(self.mirror), "log",
                   "--no-renames", "--format=@%ct", "--name-only", HEAD_REF, "--",
                   ":(top,glob)*"]
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=env) as proc:
            assert proc.stdout is not None
            current = 0.0
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                match = _DATE_LINE.match(line)
                if match:
                    current = float(match.group(1))
                elif line in names and line not in dates:
                    dates[line] = current
                    if len(dates) == len(names):
                        proc.kill()  # every file is dated; the rest of history is not needed
                        break
        return dates

    def fetch(self, name: str) -> bytes:
        return dict(self.fetch_many([name]))[name]

    def fetch_many(self, names: Iterable[str]) -> Iterator[tuple[str, bytes]]:
        wanted = list(names)
        if not wanted:
            return
        if not self._blobs:
            self.list_files()
        for name in wanted:
            if name not in self._blobs:
                raise RemoteUnavailableError(f"{self.shown_url} has no file {name!r} at {self.ref}")
            if self._blobs[name][1] > MAX_FILE_BYTES:
                raise RemoteUnavailableError(
                    f"{self.shown_url}: {name} is larger than {MAX_FILE_BYTES}")
        shas = "".join(self._blobs[n][0] + "\n" for n in wanted).encode()
        out = self._git("cat-file", "--batch", stdin=shas)
        offset = 0
        for name in wanted:
            end = out.index(b"\n", offset)
            header = out[offset:end].decode("utf-8", "replace").split()
            if len(header) != 3 or header[1] != "blob" or header[0] != self._blobs[name][0]:
                raise RemoteUnavailableError(f"git could not read {name} ({' '.join(header)})")
            size = header[2]
            start = end + 1
            yield name, out[start : start + int(size)]
            offset = start + int(size) + 1
