"""Walk 5 (h1): the CLI's --store URLs go through the store openers in any case; folders that
are no field's name are skipped, visibly; frontmatter is plain YAML; options a backend does
not take are refused."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from .test_portable_archive import run_main
from .test_transports import moto_endpoint, s3  # noqa: F401 (the transport tests' fixtures)

UNKNOWN = "error: no store can be opened from a ftp:// URL (known schemes: s3://)"


@pytest.mark.parametrize("args", [
    ("--store", "ftp://x", "ls"), ("--store", "FTP://x", "init"), ("init", "ftp://x"),
    ("--store", "ftp://x", "serve"), ("--store", "ftp://x", "mcp"),
    ("--store", "ftp://x", "passwd", "bob", "--password-stdin"),
    ("--store", "ftp://x", "setup", "claude-code", "--scope", "project", "--dir", "."),
])
def test_a_store_url_of_an_unknown_scheme_is_refused_naming_the_known_ones(
        args: tuple[str, ...], capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--store ftp://x ls` said "no store at ftp:/x" (a local folder "ftp:"), and `init`
    made that folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"s3cret\n")))
    code, _, err = run_main(capsys, *args)
    assert code == 1 and err.startswith(UNKNOWN) and err.count("\n") == 1, err
    assert "point --store / DEEPFIELD_STORE" in err
    assert list(tmp_path.iterdir()) == []


def test_an_upper_case_s3_store_is_the_bucket(
        s3: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--store S3://b/p ls` said "no store at S3:/b/p": only a lowercase s3:// was a bucket."""
    client, bucket = s3
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    url = f"S3://{bucket}/team"
    code, out, err = run_main(capsys, "--store", url, "--embedder", "none", "init")
    assert (code, err) == (0, "") and out.startswith(f"created store s3://{bucket}/team ")
    code, out, err = run_main(capsys, "init", url)
    assert (code, err) == (0, "") and out.startswith(f"using existing store s3://{bucket}/")
    assert run_main(capsys, "--store", url, "new", "notes")[0] == 0
    code, out, err = run_main(capsys, "--store", url, "ls")
    assert (code, err) == (0, "") and "notes" in out
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"s3cret\n")))
    code, out, err = run_main(capsys, "--store", url, "passwd", "dave", "--password-stdin")
    assert (code, err) == (0, "")
    assert out == f"password for dave saved in s3://{bucket}/team/deepfield.toml\n"
    config = client.get_object(Bucket=bucket, Key="team/deepfield.toml")["Body"].read()
    assert b"dave = " in config
    assert list(work.iterdir()) == []  # no folder "S3:" nor "S3-…"


def test_a_folder_that_is_no_field_name_is_skipped_said_and_left_untouched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A sub-folder "Bad Name" was listed as a field, and searching the store wrote an index
    and listing.md into it."""
    import deepfield

    root = tmp_path / "m"
    deepfield.init(root, "none").close()
    (root / "notes").mkdir()
    bad = root / "Bad Name"
    bad.mkdir()
    (bad / "mine.txt").write_text("user data\n")
    skipped = ("skipped folder 'Bad Name': not a field name (lowercase letters, digits and "
               "hyphens, a letter or digit at each end); rename it (e.g. to 'bad-name') to "
               "use it as a field")
    with deepfield.open(root, embedder=None) as store:
        assert store.field_names() == ["notes"]
        assert [f.name for f in store.fields()] == ["notes"]
        assert store.skipped_folders() == [skipped]
        assert store.search("x").warnings == [skipped]
        assert store.search("x", fields="notes").warnings == []
        with pytest.raises(deepfield.InvalidNameError, match=r"not a spec filename.*bad-name"):
            store.field("Bad Name")
        with pytest.raises(deepfield.InvalidNameError, match="not a spec filename"):
            store.search("x", fields=["Bad Name"])
    for args in (("ls",), ("search", "x"), ("status",)):
        code, out, err = run_main(capsys, "--store", str(root), *args)
        assert code == 0 and err == f"warning: {skipped}\n" and "Bad Name" not in out, args
    code, _, err = run_main(capsys, "--store", str(root), "ls", "Bad Name")
    assert code == 1 and err.startswith("error: field name 'Bad Name' is not a spec filename")
    assert sorted(p.name for p in bad.iterdir()) == ["mine.txt"]


def test_frontmatter_is_written_as_plain_yaml(tmp_path: Path) -> None:
    """A set in frontmatter= was written as `tags: !!set {a: null}`, which other Markdown
    tools cannot read; a frozenset was refused and bytes became `!!binary`."""
    import datetime

    import yaml

    import deepfield
    from deepfield.page import Page

    with deepfield.init(tmp_path / "m", "none") as store:
        notes = store.create_field("notes")
        notes.add("Tagged", "Body.\n", frontmatter={
            "tags": {"wok", "iron"}, "pair": (1, 2), "nested": {"seen": frozenset({3, 1})},
            "mixed": {1, "a"}, "day": datetime.date(2024, 5, 1)})
        text = (notes.path / "tagged.md").read_text()
        assert "!!" not in text
        meta = yaml.safe_load(text.split("---\n")[1])
        assert (meta["tags"], meta["pair"], meta["nested"]) == (
            ["iron", "wok"], [1, 2], {"seen": [1, 3]})
        assert sorted(map(str, meta["mixed"])) == ["1", "a"]
        assert meta["day"] == datetime.date(2024, 5, 1)  # a YAML date, as before
        notes.write(Page("Body.\n", {"title": "Written", "tags": frozenset({"b", "a"})}))
        assert "tags:\n- a\n- b\n" in (notes.path / "written.md").read_text()
        for value, what in ((b"raw", "a bytes"), (object(), "an object")):
            with pytest.raises(deepfield.InvalidPageError,
                               match=f"value of 'blob' is \\(or holds\\) {what}, which plain"):
                notes.add("Refused", "Body.\n", frontmatter={"blob": [value]})
        with pytest.raises(deepfield.InvalidPageError, match="value of 'blob'"):
            notes.write(Page("Body.\n", {"title": "Refused", "blob": b"raw"}))
        pages = sorted(p.name for p in notes.path.glob("*.md"))
        assert pages == ["listing.md", "tagged.md", "written.md"]


def test_the_keyword_only_backend_takes_no_options(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`init(path, EmbeddingConfig("none", {"model": "x"}))` wrote the option, ignored."""
    import deepfield
    from deepfield import ConfigError, EmbeddingConfig

    with pytest.raises(ConfigError, match=r"the none embedding backend \(keyword only\) takes "
                       "no options, not 'model'"):
        deepfield.init(tmp_path / "a", EmbeddingConfig("none", {"model": "x"}))
    assert not (tmp_path / "a").exists()
    monkeypatch.setenv("DEEPFIELD_EMBED_MODEL", "x")
    code, _, err = run_main(capsys, "--embedder", "none", "init", str(tmp_path / "b"))
    assert code == 1 and err.startswith("error: the none embedding backend (keyword only) "
                                        "takes no options, not 'model' (leave them out")
    assert not (tmp_path / "b").exists()
    monkeypatch.delenv("DEEPFIELD_EMBED_MODEL")
    # a store written before: still opens, keyword only, and says what to remove
    root = tmp_path / "c"
    deepfield.init(root, "none").close()
    (root / "deepfield.toml").write_text('[embedding]\nbackend = "none"\nmodel = "x"\n')
    said = (f"{root}/deepfield.toml: the none embedding backend (keyword only) ignores the "
            "option 'model'; remove it from [embedding]")
    with deepfield.open(root) as store:
        assert store.embedder is None and store.config.warnings == (said,)
        assert store.config.embedding == EmbeddingConfig("none")
    code, out, err = run_main(capsys, "--store", str(root), "ls")
    assert (code, err) == (0, f"warning: {said}\n") and out.startswith("no fields yet")
