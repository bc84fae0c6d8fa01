"""The CLI as a new user meets it: options honoured in every mode, clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deepfield.cli.app import Settings
from deepfield.errors import PageNotFoundError

from .conftest import Cli, MainCli
from .test_transports import moto_endpoint, s3  # noqa: F401 (the transport tests' fixtures)


def _superseded_pair(cli: Cli) -> None:
    cli("new", "notes")
    cli("add", "notes", "--title", "Wok old", "the wok recipe, first version")
    cli("add", "notes", "--title", "Wok new", "the wok recipe, second version")
    assert cli("supersede", "notes", "wok-old", "wok-new").exit_code == 0


def test_batch_search_honours_include_superseded(cli: Cli, tmp_path: Path) -> None:
    _superseded_pair(cli)
    batch = tmp_path / "q.txt"
    batch.write_text("wok recipe\n")
    hidden = json.loads(cli("search", "--batch", str(batch)).stdout)
    assert [r["filename"] for r in hidden["results"]] == ["wok-new.md"]
    shown = json.loads(cli("search", "--batch", str(batch), "--include-superseded").stdout)
    assert sorted(r["filename"] for r in shown["results"]) == ["wok-new.md", "wok-old.md"]


def test_batch_line_with_an_unknown_key_is_an_error_line(cli: Cli, tmp_path: Path) -> None:
    _superseded_pair(cli)
    batch = tmp_path / "q.jsonl"
    batch.write_text('{"id": 7, "query": "wok", "field": "elsewhere"}\n{"query": "wok"}\n')
    lines = [json.loads(line) for line in cli("search", "--batch", str(batch)).stdout.splitlines()]
    assert lines[0]["id"] == 7 and "unknown key \"field\"" in lines[0]["error"]
    assert lines[1]["count"] == 1


def test_a_mistyped_command_names_the_likely_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ran = MainCli(tmp_path / "s", capsys, monkeypatch)("serch", "wok")
    assert ran.exit_code == 2 and "Did you mean 'search'?" in ran.stderr
    assert ran.stderr.count("\n") == 1


def test_a_trailing_store_without_a_value_says_it_needs_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ran = MainCli(tmp_path / "s", capsys, monkeypatch)("ls", "notes", "--store")
    assert ran.exit_code == 2
    assert "'--store' requires an argument" in ran.stderr and "No such option" not in ran.stderr


def test_an_error_before_the_command_runs_is_json_with_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPFIELD_EMBED_THREADS", "many")
    ran = MainCli(tmp_path / "s", capsys, monkeypatch)("ls", "--json")
    assert ran.exit_code == 1
    assert "DEEPFIELD_EMBED_THREADS" in json.loads(ran.stdout)["error"]["message"]


@pytest.mark.parametrize("args", [["--store", "", "init"], ["init", ""], ["init", " "]])
def test_an_empty_store_folder_is_refused_not_the_working_folder(
        args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ran = MainCli(tmp_path / "s", capsys, monkeypatch)(*args, "--json")
    assert ran.exit_code == 2 and "empty" in json.loads(ran.stdout)["error"]["message"]
    assert not (tmp_path / "deepfield.toml").exists()


def test_init_of_an_s3_directory_starts_a_store_in_the_bucket(
        s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    _, bucket = s3
    monkeypatch.chdir(tmp_path)
    url = f"s3://{bucket}/made"
    cli = Cli(tmp_path / "unused")
    assert cli.json("--embedder", "fake", "init", url)["store"] == url
    assert not (tmp_path / "s3:").exists()
    # ls and status name the store as given, not the working copy in the cache
    assert cli.json("--store", url, "ls") == {"store": url, "fields": []}
    assert cli.json("--store", url, "status")["store"] == url
    assert f"store {url} ·" in cli("--store", url, "status").stdout


def test_a_folder_that_is_not_a_store_gets_a_command_line_hint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plain").mkdir()
    ran = MainCli(tmp_path / "plain", capsys, monkeypatch)("ls", "--json")
    hint = json.loads(ran.stdout)["error"]["hint"]
    assert ran.exit_code == 1 and "deepfield init" in hint
    assert "open_field" not in hint and "create=True" not in hint


def test_a_group_without_a_command_shows_its_help_as_it_reads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ran = MainCli(tmp_path / "s", capsys, monkeypatch)("domain")
    assert ran.exit_code == 2
    assert ran.stderr.startswith("Usage: deepfield domain") and "\nCommands:\n" in ran.stderr
    assert "error:" not in ran.stderr


@pytest.mark.parametrize("args", [["search", "wok"], ["research", "wok", "--offline"],
                                  ["index"]])
def test_a_store_without_fields_is_one_error_for_every_search(
        args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, keyword_store: Any) -> None:
    ran = MainCli(keyword_store.root, capsys, monkeypatch)(*args, "--json")
    assert ran.exit_code == 1, ran.stderr
    error = json.loads(ran.stdout)["error"]
    assert "has no fields yet" in error["message"] and "deepfield new" in error["hint"]


def test_every_batch_error_line_has_the_same_keys(cli: Cli, tmp_path: Path) -> None:
    _superseded_pair(cli)
    batch = tmp_path / "q.jsonl"
    batch.write_text('{bad json\n{"k": 3}\n{"query": "wok", "k": 0}\n')
    lines = [json.loads(line) for line in cli("search", "--batch", str(batch)).stdout.splitlines()]
    assert [sorted(line) for line in lines] == [["error", "id", "line"]] * 3


def test_ctrl_c_with_json_is_a_json_error_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(self: Settings) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Settings, "store", interrupted)
    cli = MainCli(tmp_path / "s", capsys, monkeypatch)
    ran = cli("ls", "--json")
    assert ran.exit_code == 130 and ran.stderr.endswith("aborted\n")  # click's Abort
    assert json.loads(ran.stdout)["error"]["type"] == "Interrupted"
    text = cli("ls")
    assert (text.exit_code, text.stdout) == (130, "") and text.stderr.endswith("aborted\n")


def test_add_keeps_title_and_summary_on_one_line(cli: Cli, tmp_path: Path) -> None:
    cli("new", "notes")
    added = cli.json("add", "notes", "--title", "Two\nlines", "--summary", "a\n  b", "body")
    page = added["pages"][0]
    assert page["title"] == "Two lines" and page["filename"] == "two-lines.md"
    assert cli.json("read", "notes", "two-lines")["summary"] == "a b"
    # a page written by hand with a multi-line title still lists on one line
    (cli.store_path / "notes" / "hand.md").write_text(
        "---\ntitle: |-\n  Hand\n  made\n---\nbody\n")
    listed = cli("ls", "notes").stdout.splitlines()
    assert "hand.md  Hand made" in listed and len(listed) == 2


def test_a_field_named_twice_is_searched_once(cli: Cli) -> None:
    _superseded_pair(cli)
    found = cli.json("search", "wok", "-f", "notes", "-f", "notes")
    assert [r["filename"] for r in found["results"]] == ["wok-new.md"]
    indexed = cli.json("index", "-f", "notes", "-f", "notes")
    assert [f["field"] for f in indexed["fields"]] == ["notes"]


def test_unpack_json_names_the_new_field(cli: Cli, tmp_path: Path) -> None:
    _superseded_pair(cli)
    zipped = tmp_path / "notes.memoryfield.zip"
    assert cli("pack", "notes", "-o", str(zipped)).exit_code == 0
    unpacked = cli.json("unpack", str(zipped), "--as", "copy")
    assert unpacked["field"] == "copy"
    assert cli.json("ls", "copy")["field"] == "copy"


def test_json_before_the_command_is_the_command_s(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, keyword_store: Any) -> None:
    cli = MainCli(keyword_store.root, capsys, monkeypatch)
    ran = cli("--json", "ls")
    assert ran.exit_code == 0 and json.loads(ran.stdout)["fields"] == []
    cli("new", "notes")
    added = cli("--json", "add", "notes", "--title", "Dash", "--", "--json")
    assert json.loads(added.stdout)["pages"][0]["filename"] == "dash.md"
    assert cli("read", "notes", "dash").stdout.rstrip().endswith("--json")


def test_a_quoted_tilde_in_the_store_means_the_home_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `--store '~/mem'` (or DEEPFIELD_STORE=~/mem from a .env file) made a folder named "~".
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    settings = Settings.of("~/mem", None, {})
    assert settings.store_path == tmp_path / "home" / "mem"
    assert Settings.of("~/mem", None, {}).store_url is None
    assert not (tmp_path / "~").exists()


def test_restore_takes_the_uuid_rm_took(cli: Cli) -> None:
    # `rm FIELD UUID` worked but `restore FIELD UUID` said "no archived page".
    cli("new", "notes")
    added = json.loads(cli("add", "notes", "--title", "Kettle", "Descale monthly.",
                           "--json").stdout)
    uuid = added["pages"][0]["uuid"]
    assert cli("rm", "notes", uuid).exit_code == 0
    restored = cli("restore", "notes", uuid, "--json")
    assert restored.exit_code == 0, restored.stderr
    assert json.loads(restored.stdout)["restored"] == "kettle.md"
    with pytest.raises(PageNotFoundError):
        cli("restore", "notes", "00000000-0000-4000-8000-000000000000")
