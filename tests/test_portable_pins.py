"""One spelling of a pin is as good as another everywhere; unpack says what it left out."""

from __future__ import annotations

import functools
import zipfile
from pathlib import Path

import pytest

import deepfield
from deepfield import portable
from deepfield.errors import FieldExistsError

from .test_portable_archive import run_main
from .test_transports import _QuietHandler, serve


@pytest.fixture
def travel(store: deepfield.Store) -> deepfield.Field:
    field = store.create_field("travel")
    field.add("Helsinki trip", "Book the sauna early.")
    return field


def test_an_unreachable_server_uses_the_cached_zip_whatever_the_pins_spelling(
        travel: deepfield.Field, tmp_path: Path) -> None:
    root = tmp_path / "www"
    root.mkdir()
    packed = portable.pack(travel, root / "travel.memoryfield.zip")
    server, url = serve(functools.partial(_QuietHandler, directory=str(root)))
    source = f"{url}travel.memoryfield.zip"
    try:
        portable.open_remote(source, pin=packed.sha256, cache=tmp_path / "cache").close()
    finally:
        server.shutdown()
        server.server_close()
    for pin in (f"sha256:{packed.sha256}", f"{packed.sha256} ", packed.sha256.upper()):
        remote = portable.open_remote(source, pin=pin, cache=tmp_path / "cache")
        assert remote.refresh_report is not None and remote.refresh_report.stale, pin
        remote.close()


def test_an_upper_case_pin_fragment_names_a_zip_for_field_options(
        capsys: pytest.CaptureFixture[str], store: deepfield.Store, travel: deepfield.Field,
        tmp_path: Path) -> None:
    packed = portable.pack(travel, tmp_path / "trip.memoryfield.zip")
    for fragment in ("SHA256", "Sha256"):
        code, stdout, stderr = run_main(
            capsys, "--store", str(store.root), "search", "sauna", "-f",
            f"{packed.path}#{fragment}={packed.sha256}")
        assert code == 0 and "helsinki-trip" in stdout, stderr


def test_unpack_prints_its_warnings(capsys: pytest.CaptureFixture[str], store: deepfield.Store,
                                    tmp_path: Path) -> None:
    zip_path = tmp_path / "g.memoryfield.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        archive.writestr("p.md", b"# P\nhello wok\n")
        archive.writestr("Upper_Case.md", b"# U\nhello\n")
    code, stdout, stderr = run_main(capsys, "--store", str(store.root), "unpack", str(zip_path))
    assert code == 0 and "unpacked 1 pages" in stdout
    assert "warning: Upper_Case.md: not a spec page name" in stderr


def test_unpack_onto_a_file_says_it_is_a_file(store: deepfield.Store, tmp_path: Path) -> None:
    zip_path = tmp_path / "f.memoryfield.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        archive.writestr("p.md", b"# P\nhello wok\n")
    (store.root / "afile").write_text("x")
    with pytest.raises(FieldExistsError, match="existing file"):
        portable.unpack(store, zip_path, name="afile")
