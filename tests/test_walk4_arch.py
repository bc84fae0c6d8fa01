"""Walk 4, structure: stores opened by URL scheme (store_openers.py), and Field.add taking a
frontmatter block the text begins with, as the CLI's `add -` does."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import deepfield
from deepfield import store_openers
from deepfield.config import EmbeddingConfig
from deepfield.embed.base import Embedder
from deepfield.errors import ConfigError, StoreNotFoundError

from .test_transports import moto_endpoint, s3  # noqa: F401 (the transport tests' fixtures)


class _Opener(deepfield.StoreOpener):
    """Opens ``mem://NAME`` as the folder NAME under ``root``; records what it was asked."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[tuple[str, object]] = []
        self.urls: list[str] = []

    def open(self, url: str, *, create: bool, embedder: Embedder | str | None) -> deepfield.Store:
        self.calls.append(("open", create))
        self.urls.append(url)
        return deepfield.open(self.root / url.split("://")[1], create=create, embedder=embedder)

    def init(self, url: str, embedding: EmbeddingConfig | None) -> deepfield.Store:
        self.calls.append(("init", embedding))
        self.urls.append(url)
        return deepfield.init(self.root / url.split("://")[1], embedding)


@pytest.fixture
def opener(tmp_path: Path) -> Iterator[_Opener]:
    made = _Opener(tmp_path / "mem")
    deepfield.register_store_opener("mem", made)
    yield made
    store_openers._registered.pop("mem", None)


def test_an_unknown_url_scheme_is_refused_naming_the_known_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ftp://host/x`` became a local path "ftp:/host/x" (with create=True, a store there)."""
    monkeypatch.chdir(tmp_path)
    for call in (lambda: deepfield.open("ftp://host/x", create=True),
                 lambda: deepfield.init("ftp://host/x")):
        with pytest.raises(StoreNotFoundError, match=r"ftp:// URL \(known schemes: s3://\)"):
            call()
    assert not (tmp_path / "ftp:").exists()


def test_a_registered_opener_opens_and_inits_its_scheme(opener: _Opener) -> None:
    with deepfield.init("mem://a", EmbeddingConfig("none")) as made:
        made.create_field("notes").add("Woks", "Carbon steel woks.")
    with deepfield.open("MEM://a", embedder=None) as store:  # schemes are case-insensitive
        assert store.field_names() == ["notes"]
    assert opener.calls == [("init", EmbeddingConfig("none")), ("open", False)]
    assert opener.urls == ["mem://a", "mem://a"]
    assert "mem" in store_openers.store_schemes()


def test_registering_an_opener_checks_scheme_opener_and_taken_names(opener: _Opener) -> None:
    with pytest.raises(ConfigError, match="already registered"):
        deepfield.register_store_opener("mem", _Opener(opener.root))
    with pytest.raises(ConfigError, match="already registered"):
        deepfield.register_store_opener("s3", _Opener(opener.root))  # a built-in
    deepfield.register_store_opener("mem", opener)  # the same one again: fine
    with pytest.raises(ConfigError, match="not a URL scheme"):
        deepfield.register_store_opener("Mem Two", opener)
    bad: Any = lambda url: None  # noqa: E731 - a function, not a StoreOpener
    with pytest.raises(ConfigError, match="must be a StoreOpener"):
        deepfield.register_store_opener("other", bad)
    replacement = _Opener(opener.root)
    deepfield.register_store_opener("mem", replacement, replace=True)
    deepfield.init("mem://b").close()
    assert replacement.calls and not opener.calls


def test_opening_a_folder_store_loads_no_bucket_code(tmp_path: Path) -> None:
    """The store layer no longer imports deepfield.bucket itself; s3 is found by scheme."""
    code = ("import sys, deepfield; deepfield.open(sys.argv[1], create=True, embedder=None)"
            ".close(); print('deepfield.bucket' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(Path(deepfield.__file__).parents[1])}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_s3_stores_open_and_init_through_the_registry(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """``deepfield.init("s3://…")`` made a local folder "s3:" instead of a store in the bucket."""
    from deepfield.bucket import BucketStore

    client, bucket = s3
    monkeypatch.chdir(tmp_path)
    with deepfield.init(f"s3://{bucket}/team", EmbeddingConfig("none")) as made:
        assert isinstance(made, BucketStore)
    assert not (tmp_path / "s3:").exists()
    assert client.get_object(Bucket=bucket, Key="team/deepfield.toml")["Body"].read()
    with deepfield.open(f"S3://{bucket}/team", embedder=None) as opened:  # any case
        assert isinstance(opened, BucketStore) and opened.url == f"s3://{bucket}/team"
        bad: Any = 123  # refused before the field's folder marker is put in the bucket
        with pytest.raises(deepfield.InvalidPageError, match="must be text, not int"):
            opened.create_field("notes", intro=bad)
        assert "Contents" not in client.list_objects_v2(Bucket=bucket, Prefix="team/notes")
        opened.create_field("notes", intro="Kitchen notes.")
    page = client.get_object(Bucket=bucket, Key="team/notes/index.md")["Body"].read()
    assert page == b"# notes\n\nKitchen notes.\n"


def test_field_add_takes_a_leading_frontmatter_block_as_the_cli_does(
    field: deepfield.Field,
) -> None:
    """``Field.add(title, note)`` kept the note's ``---`` block as body text under the page's
    own frontmatter; only the CLI's ``add -`` read it."""
    note = "---\ntitle: X\ntags: [wok]\nsummary: Inner\nsource: chat\n---\nBody\n"
    added = field.add("T", note)
    _, page = field.load(added.pages[0].filename)
    assert page.body == "Body\n"
    assert page.frontmatter is not None
    assert (page.frontmatter["title"], page.frontmatter["tags"], page.frontmatter["summary"],
            page.frontmatter["source"]) == ("T", ["wok"], "Inner", "chat")
    added = field.add("U", note, summary="Mine", frontmatter={"source": "me"})
    _, page = field.load(added.pages[0].filename)
    assert page.frontmatter is not None
    assert (page.frontmatter["summary"], page.frontmatter["source"]) == ("Mine", "me")
    assert page.frontmatter["tags"] == ["wok"]


@pytest.mark.parametrize(("text", "match"), [
    ("---\nuuid: 12\n---\nBody\n", "has a uuid"),
    ("---\ntitle: [\n---\nBody\n", "cannot be read"),
    ("---\ntags: [a]\n---\n", "only a frontmatter block"),
])
def test_field_add_refuses_a_block_it_cannot_take(
    field: deepfield.Field, text: str, match: str
) -> None:
    from deepfield.errors import InvalidPageError

    with pytest.raises(InvalidPageError, match=match):
        field.add("V", text)
    assert [p.filename for p in field.pages()] == []


def test_field_add_keeps_prose_between_rules_as_text(field: deepfield.Field) -> None:
    prose = "---\nIntro\n---\nBody\n"  # a rule and a setext heading: Markdown, kept
    added = field.add("Y", prose)
    _, page = field.load(added.pages[0].filename)
    assert page.body == prose


def test_field_add_title_and_summary_are_one_line_and_a_title_is_needed(
    field: deepfield.Field,
) -> None:
    """Only the CLI folded line breaks and refused a blank title: ``Field.add("A\\nB", …)``
    stored a two-line title, and ``"   "`` a blank one."""
    added = field.add("Wok\n  care ", "Oil it.", summary="One\ntwo.")
    _, page = field.load(added.pages[0].filename)
    assert (page.title, page.summary) == ("Wok care", "One two.")
    from deepfield.errors import InvalidPageError

    for blank in ("", "  \n "):
        with pytest.raises(InvalidPageError, match="the title is empty"):
            field.add(blank, "Text.")


def test_field_add_with_a_uuid_in_frontmatter_never_replaces_another_page(
    field: deepfield.Field,
) -> None:
    """``add(…, frontmatter={"uuid": u})`` replaced the page carrying ``u`` (its title and text
    gone from the field) although add always makes a new page."""
    from deepfield.errors import InvalidPageError

    first = field.add("First", "First text.").pages[0]
    with pytest.raises(InvalidPageError, match="frontmatter= has a uuid"):
        field.add("Second", "Second text.", frontmatter={"uuid": first.uuid})
    assert field.read(first.filename).title == "First"


def test_an_empty_path_is_refused_not_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``deepfield.init("")`` (say, an unset variable) made the working folder a store, and
    ``open_field("")`` opened it as a field; the CLI already refused an empty folder."""
    from deepfield.errors import PageNotFoundError, StoreError

    monkeypatch.chdir(tmp_path)
    for call in (lambda: deepfield.init(""), lambda: deepfield.open(" ", create=True),
                 lambda: deepfield.open("")):
        with pytest.raises(StoreError, match="empty string"):
            call()
    with pytest.raises(PageNotFoundError, match="empty string"):
        deepfield.open_field("")
    assert list(tmp_path.iterdir()) == []
    deepfield.init(".", EmbeddingConfig("none")).close()  # the working folder, said so
    assert (tmp_path / "deepfield.toml").is_file()


def test_a_field_named_twice_is_searched_once(store: deepfield.Store) -> None:
    """``store.search(q, fields=["a", "a"])`` returned every hit of ``a`` twice."""
    store.create_field("a").add("Wok care", "Oil the wok after washing.")
    store.create_field("b").add("Wok seasoning", "Season the wok with oil.")
    hits = store.search("wok", fields=["a", "b", "a"], mode="bm25").results
    assert sorted((h.field, h.filename) for h in hits) == [
        ("a", "wok-care.md"), ("b", "wok-seasoning.md")]


def test_open_field_refuses_a_store_and_builds_a_named_embedder(
    store: deepfield.Store,
) -> None:
    """``open_field(store_root)`` wrote pages, listing.md and an index into the store's own
    folder; ``open_field(path, embedder="none")`` kept the string, and a search crashed with
    AttributeError."""
    from deepfield.errors import StoreError

    store.create_field("notes").add("Wok care", "Oil the wok after washing.")
    with pytest.raises(StoreError, match="is a store"):
        deepfield.open_field(store.root)
    assert sorted(p.name for p in store.root.iterdir()) == ["deepfield.toml", "notes"]
    keywords = deepfield.open_field(store.root / "notes", embedder="none")
    assert keywords.embedder is None
    assert [h.filename for h in keywords.search("wok").results] == ["wok-care.md"]
    assert deepfield.open_field(store.root / "notes", "fake").embedder is not None
    bad: Any = 3
    with pytest.raises(ConfigError, match="not int"):
        deepfield.open_field(store.root / "notes", bad)


@pytest.mark.parametrize(("intro", "match"), [
    (123, "must be text, not int"),
    (b"Notes", "must be text, not bytes"),
    ("a\x00b", "looks binary"),
    ("a\udc80b", "not valid UTF-8"),
])
def test_a_bad_intro_is_refused_before_the_field_is_made(
    store: deepfield.Store, intro: Any, match: str
) -> None:
    """``create_field("a", intro=123)`` made the folder, then crashed with AttributeError (a
    NUL was written into index.md): the field was left half made."""
    from deepfield.errors import InvalidPageError

    with pytest.raises(InvalidPageError, match=match):
        store.create_field("a", intro=intro)
    assert store.field_names() == []


def test_a_blank_intro_writes_no_index_page(store: deepfield.Store) -> None:
    store.create_field("a", intro="  \n ")
    assert store.field("a").intro() is None


def test_a_home_relative_path_is_the_home_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``deepfield.open("~/memory", create=True)`` made a folder named "~" in the working
    folder (the CLI's --store already expanded it)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    with deepfield.open("~/memory", create=True, embedder=None) as store:
        store.create_field("notes").add("Wok care", "Oil the wok.")
    assert (tmp_path / "home" / "memory" / "deepfield.toml").is_file()
    deepfield.init("~/memory").close()  # opened as it is
    assert deepfield.open_field("~/memory/notes").path == tmp_path / "home/memory/notes"
    assert list((tmp_path / "work").iterdir()) == []


def test_a_field_removed_on_disk_is_unknown_not_a_file_not_found(
    store: deepfield.Store,
) -> None:
    """A field folder deleted while the Store was open: ``store.field(name)`` still handed
    out the old handle, and a write through it raised a bare FileNotFoundError."""
    import shutil

    from deepfield.errors import UnknownFieldError

    old = store.create_field("gone")
    old.add("Wok care", "Oil the wok.")
    shutil.rmtree(store.root / "gone")
    with pytest.raises(UnknownFieldError, match="is gone"):
        old.add("Wok rust", "Scrub it.")
    with pytest.raises(UnknownFieldError, match="no field 'gone'"):
        store.field("gone")
    assert not (store.root / "gone").exists()
    store.create_field("gone").add("Wok rust", "Scrub it.")  # made again: a fresh handle
    assert [d.filename for d in store.field("gone").pages()] == ["wok-rust.md"]


def test_init_takes_a_backend_name_and_refuses_what_it_cannot_write(tmp_path: Path) -> None:
    """``init(path, "none")`` and ``EmbeddingConfig("none", ["x"])`` raised AttributeError (the
    second after making the folder); an option name TOML cannot hold wrote a deepfield.toml
    that never opened again."""
    with deepfield.init(tmp_path / "a", "none") as made:
        assert made.config.embedding == EmbeddingConfig("none")
    cases: list[tuple[Any, str]] = [(EmbeddingConfig("none", ["x"]), "not list"),  # type: ignore[arg-type]
                                    (EmbeddingConfig("fake", {"a b": 1}), "cannot be written"),
                                    (EmbeddingConfig("none", {"a": 1}), "takes no options"),
                                    (3, "not int")]
    for embedding, match in cases:
        with pytest.raises(ConfigError, match=match):
            deepfield.init(tmp_path / "b", embedding)
    assert not (tmp_path / "b").exists()


def test_fields_that_are_no_names_are_one_clear_error(store: deepfield.Store) -> None:
    """``fields=123`` raised TypeError ("not iterable"); ``fields=b"notes"`` said "not int"."""
    from deepfield.errors import InvalidNameError

    store.create_field("notes").add("Wok care", "Oil the wok.")
    for bad in (123, b"notes"):
        with pytest.raises(InvalidNameError, match="fields= takes a field name or a list"):
            store.search("wok", fields=bad)  # type: ignore[arg-type]
    assert store.search("wok", fields=(n for n in ["notes"])).results  # type: ignore[arg-type]


def test_restore_of_a_name_that_is_not_text_is_a_clear_error(field: deepfield.Field) -> None:
    """``field.restore(None)`` raised AttributeError ('NoneType' … 'startswith')."""
    from deepfield.errors import InvalidNameError

    for bad in (None, 12):
        with pytest.raises(InvalidNameError, match="must be text"):
            field.restore(bad)  # type: ignore[arg-type]


def test_store_research_checks_question_and_budget_types(store: deepfield.Store) -> None:
    """``store.research(None)`` and ``budget="500"`` raised TypeError from the fence's budget
    check, before research() could say what was wrong."""
    from deepfield.errors import BudgetError, DeepfieldError

    store.create_field("notes").add("Wok care", "Oil the wok after washing.")
    with pytest.raises(DeepfieldError, match="the question must be text, not NoneType"):
        store.research(None)  # type: ignore[arg-type]
    with pytest.raises(BudgetError, match="whole number of tokens, not str"):
        store.research("how is the wok oiled?", budget="500")  # type: ignore[arg-type]
    assert "wok" in store.research("how is the wok oiled?", budget=500).context.lower()


def test_a_file_where_a_field_would_go_is_named_as_a_file(store: deepfield.Store) -> None:
    """A file ``notes`` in the store: ``create_field("notes")`` said the field already
    exists, and with ``exist_ok=True`` that there is no field ``notes``."""
    from deepfield.errors import FieldExistsError

    (store.root / "notes").write_text("x")
    for exist_ok in (False, True):
        with pytest.raises(FieldExistsError, match="is a file, not a field folder"):
            store.create_field("notes", exist_ok=exist_ok)
