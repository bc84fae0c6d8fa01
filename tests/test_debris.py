"""Debris of killed processes is cleaned by the next command that touches the place, and only
once no live process holds it (issue 18 item 3): decided by a lock, not by age."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import deepfield
from deepfield import debris
from deepfield.config import EmbeddingConfig
from deepfield.portable import archive

HOURS_AGO = time.time() - 7200

# A process that makes one piece of debris the way deepfield does (a held temp file or
# unpack folder), says where, and waits to be killed. It does not import deepfield (a fast
# start); the last test checks that deepfield's own code holds what it makes.
MAKER = textwrap.dedent(
    """
    import fcntl, os, sys, tempfile, time
    UNPACK_PREFIX, TEMP_PREFIX, TEMP_SUFFIX = ".deepfield-unpack-", ".deepfield-", ".tmp"
    kind, folder = sys.argv[1], sys.argv[2]
    if kind == "unpack":
        path = tempfile.mkdtemp(prefix=UNPACK_PREFIX, dir=folder)
        open(os.path.join(path, "page.md"), "w").write("# half\\n")
        fd = os.open(path, os.O_RDONLY)
    else:
        fd, path = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=folder)
        os.write(fd, b"half a page")
        if kind == "pack":  # the index snapshot beside the zip being written
            open(path[: -len(TEMP_SUFFIX)] + ".sqlite3", "wb").write(b"snapshot")
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as deepfield.debris.hold
    print(path, flush=True)
    time.sleep(600)
    """
)


def _make(kind: str, folder: Path) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", MAKER, kind, str(folder)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    path = Path(proc.stdout.readline().strip())
    assert path.exists()
    return proc, path


def _age(*paths: Path) -> None:
    """Old enough that age alone would call it debris."""
    for path in paths:
        os.utime(path, (HOURS_AGO, HOURS_AGO))


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture
def kstore(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    deepfield.init(path, EmbeddingConfig("none"))
    with deepfield.open(path) as store:
        store.create_field("notes").add("Woks", "Carbon fibre woks heat unevenly.")
    return path


def test_temp_pages_of_a_killed_writer_go_at_the_next_write(kstore: Path) -> None:
    folder = kstore / "notes"
    dead, dead_path = _make("page", folder)
    live, live_path = _make("page", folder)
    try:
        _kill(dead)
        _age(dead_path, live_path)
        with deepfield.open(kstore) as store:
            store.field("notes").add("Pans", "Cast iron pans hold heat.")
        assert not dead_path.exists()  # no live process held it
        assert live_path.exists()  # an hour old, but its writer is alive
        _kill(live)
        with deepfield.open(kstore) as store:
            store.field("notes").index()
        assert not live_path.exists()
    finally:
        for proc in (dead, live):
            _kill(proc)


def test_a_killed_unpack_folder_goes_at_the_next_command(kstore: Path) -> None:
    dead, dead_path = _make("unpack", kstore)
    live, live_path = _make("unpack", kstore)
    try:
        _kill(dead)
        _age(dead_path, live_path)
        deepfield.open(kstore).close()
        assert not dead_path.exists() and live_path.exists()
    finally:
        _kill(live)
    assert sorted(deepfield.open(kstore).field_names()) == ["notes"]
    assert not live_path.exists()


def test_a_killed_pack_leaves_nothing_for_the_next_pack(kstore: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    dead, dead_path = _make("pack", out)
    _kill(dead)
    snapshot = dead_path.with_suffix(".sqlite3")
    _age(dead_path, snapshot)
    with deepfield.open(kstore) as store:
        fld = store.field("notes")
        archive.pack_folder(fld.path, out / "notes.memoryfield.zip",
                            index_path=fld.index_handle().path)
    assert sorted(p.name for p in out.iterdir()) == ["notes.memoryfield.zip"]


def test_deepfields_own_temporaries_are_held_while_in_use(kstore: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The real code paths hold what they make: a cleaner running meanwhile keeps it."""
    seen: list[bool] = []
    real_copy = archive.copy_member

    def watching_copy(*args: object, **kwargs: object) -> int:
        staging = next(kstore.glob(".deepfield-unpack-*"))
        os.utime(staging, (HOURS_AGO, HOURS_AGO))
        seen.append(debris.owned(staging) and not debris.clean(kstore, unpack=True))
        return real_copy(*args, **kwargs)  # type: ignore[arg-type]

    with deepfield.open(kstore) as store:
        fld = store.field("notes")
        packed = archive.pack_folder(fld.path, tmp_path / "n.memoryfield.zip")
    monkeypatch.setattr(archive, "copy_member", watching_copy)
    archive.extract_checked(packed.path, kstore / "copy")
    assert seen and all(seen)
    assert (kstore / "copy" / "woks.md").is_file()

    from deepfield import fsutil

    real_replace = os.replace
    held: list[bool] = []

    def watching_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(src).name.startswith(".deepfield-"):
            os.utime(src, (HOURS_AGO, HOURS_AGO))
            held.append(debris.owned(Path(src)))
        real_replace(src, dst)

    monkeypatch.setattr(fsutil.os, "replace", watching_replace)
    fsutil.atomic_write(kstore / "notes" / "woks.md", b"# Woks\n\nRewritten.\n")
    assert held == [True]


TORN = textwrap.dedent(
    """
    import os, signal, sys, deepfield
    field = deepfield.open(sys.argv[1], embedder=None).field("notes")
    real = os.replace

    def replace_then_die(source, target):  # killed right after the first part lands
        real(source, target)
        if os.path.basename(str(target)).startswith("big"):
            os.kill(os.getpid(), signal.SIGKILL)

    os.replace = replace_then_die
    field.write(sys.argv[2], name="big", review=False)
    """
)


def _big(letter: str) -> str:
    return "# Big\n\n" + "\n\n".join(f"{letter}{j} " + letter * 300 for j in range(60)) + "\n"


def _versions(folder: Path) -> set[str]:
    found: set[str] = set()
    for path in folder.glob("big*.md"):
        found |= {line[0] for line in path.read_text().splitlines()
                  if line[:1] in ("A", "B") and line[1:2].isdigit()}
    return found


def test_a_split_page_killed_among_its_renames_is_finished(kstore: Path) -> None:
    folder = kstore / "notes"
    with deepfield.open(kstore) as store:
        store.field("notes").write(_big("A"), name="big", review=False)
    done = subprocess.run([sys.executable, "-c", TORN, str(kstore), _big("B")], timeout=120,
                          check=False)
    assert done.returncode == -signal.SIGKILL
    assert _versions(folder) == {"A", "B"}  # torn: one part new, the others old
    assert list(folder.glob(".deepfield-*.renames"))
    with deepfield.open(kstore) as store:
        store.field("notes").index()  # the next command that touches the field
    assert _versions(folder) == {"B"}  # finished: the whole page is the new version
    assert debris.clean(folder) == [] and not list(folder.glob(".deepfield-*"))
