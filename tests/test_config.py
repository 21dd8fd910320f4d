"""Options: TOML configs, flags over configs, the environment."""

from __future__ import annotations

import pytest

from bpe_dask import BpeDaskError
from bpe_dask.cli.config import load_config, parse_size, resolve


def test_sizes():
    assert parse_size("64MiB") == 64 * 2**20
    assert parse_size("65536") == parse_size(65536) == 65536
    assert parse_size("1.5kB") == 1500
    for bad in ("lots", "0", "-1", True):
        with pytest.raises(BpeDaskError):
            parse_size(bad)


def test_config_paths_are_relative_to_the_file_and_urls_are_left_alone(tmp_path):
    (tmp_path / "job.toml").write_text(
        'inputs = ["data/*.txt", "s3://bucket/x.txt"]\nout = "out"\nvocab-size = 500\n'
        '[storage_options]\nanon = true\nclient_kwargs = {region_name = "eu-west-1"}\n'
    )
    options = load_config(str(tmp_path / "job.toml"))
    assert options["inputs"] == [str(tmp_path / "data/*.txt"), "s3://bucket/x.txt"]
    assert options["out"] == str(tmp_path / "out")
    assert options["vocab_size"] == 500
    assert options["storage_options"] == {"anon": True, "client_kwargs": {"region_name": "eu-west-1"}}


def test_flags_beat_the_config_which_beats_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://from-env:8786")
    assert resolve({})["scheduler"] == "tcp://from-env:8786"
    (tmp_path / "job.toml").write_text('scheduler = "tcp://from-file:8786"\nchunk_size = "1MiB"\n')
    options = resolve({"chunk_size": "2MiB"}, str(tmp_path / "job.toml"))
    assert options["scheduler"] == "tcp://from-file:8786"
    assert options["chunk_size"] == 2 * 2**20


def test_a_vocabulary_size_in_thousands_in_a_config_file(tmp_path):
    """As on the command line: 32k is 32,000, 32Ki 32,768 (both were refused)."""
    (tmp_path / "job.toml").write_text('vocab_size = "32k"\nvocab_sizes = [8000, "16Ki"]\n')
    options = resolve({}, str(tmp_path / "job.toml"))
    assert (options["vocab_size"], options["vocab_sizes"]) == (32_000, [8000, 16_384])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("vocab_sise = 5\n", r"unknown option 'vocab_sise' \(did you mean vocab_size\?\)$"),
        ("quite = true\n", r"unknown option 'quite' \(did you mean quiet\?\)$"),
        ("xyzzy = 1\n", r"unknown option 'xyzzy'$"),  # nothing close: no guess
        ("vocab_size = 'many'\n", "not a whole number"),
        ("vocab_size = \"500\"\n", r"vocab_size: not a whole number: '500' \(a TOML number has no quotes\)"),
        ("workers = 2.0\n", "workers: not a whole number: 2.0"),
        ("min_frequency = true\n", "min_frequency: not a whole number: True"),
        ("special_tokens = 3\n", "not a list of strings"),
        ("storage_options = 'x'\n", "not JSON"),
        ("merge_on = 'moon'\n", "auto, client or worker"),
        ("utf8_errors = 'ignore'\n", "utf8_errors: invalid UTF-8 handling must be strict or replace"),
        ("this is not toml\n", "not valid TOML"),
    ],
)
def test_config_mistakes_are_named(tmp_path, text, message):
    (tmp_path / "job.toml").write_text(text)
    with pytest.raises(BpeDaskError, match=message):
        load_config(str(tmp_path / "job.toml"))


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["train", "in.txt", "--vocab-szie", "300", "--out", "o"],
         "--vocab-szie 300 (did you mean --vocab-size?)"),
        (["train", "in.txt", "--vocab-size=300", "--wrokers=2", "--out", "o"], "(did you mean --workers?)"),
        (["encode", "in.txt", "--tokenzier", "t", "--out", "o.bin"], "(did you mean --tokenizer?)"),
        # Another command's flag is no typo: the hint names the commands that take it.
        (["count", "in.txt", "--vocab-size", "300", "--out", "c.parquet"],
         "--vocab-size 300 (--vocab-size is an option of train and merge, not of count)"),
        (["train", "in.txt", "--vocab-size", "300", "--vocab-sizes", "8", "--out", "o"],
         "(--vocab-sizes is an option of evaluate, not of train)"),
    ],
)
def test_a_mistyped_flag_is_a_usage_error_that_names_the_flag_it_was_meant_to_be(argv, suggestion, capsys):
    from bpe_dask.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("bpe-dask: error: unrecognized arguments: ")
    assert error.rstrip().endswith(suggestion)
    assert error.count("\n") == 1  # one line
