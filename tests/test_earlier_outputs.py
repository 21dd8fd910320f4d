"""Outputs read back as inputs: a folder holding what every bpe-dask job writes, beside a text file,
trains exactly as the text file alone, with one line saying what was skipped; token ids or word
counts bpe-dask wrote, named on their own, are refused in one line saying what they are. Every
output here is written by the job itself (on a real LocalCluster of worker processes, whose work
directories are kept), so a job that writes a new kind of file fails this test until the listing
knows it (``io.written``)."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
from pathlib import Path

import commands
import corpus
import pytest

import bpe_dask
from bpe_dask import BpeDaskError, Tokenizer
from bpe_dask.cli.parser import build_parser
from bpe_dask.io.inputs import expand_inputs
from conftest import read_reference_merges

EOT = "<|endoftext|>"
VOCAB_SIZE = 256 + 1 + 80


def _tokenizer(folder: Path, client) -> None:
    bpe_dask.train(str(folder / "a.txt"), VOCAB_SIZE, str(folder / "tok"), [EOT], client=client,
                   work_dir=str(folder / "train-work"))  # fmt: skip


def _count(folder: Path, client) -> None:
    bpe_dask.count_words(str(folder / "a.txt"), [EOT], out=str(folder / "counts.parquet"), client=client,
                         work_dir=str(folder / "count-work"))  # fmt: skip


def _merge(folder: Path, client) -> None:
    bpe_dask.merge(str(folder / "counts.parquet"), VOCAB_SIZE, str(folder / "merged"), [EOT])


def _encode(folder: Path, client) -> None:
    tokenizer = Tokenizer.load(folder / "tok")
    bpe_dask.encode(str(folder / "a.txt"), tokenizer, str(folder / "heldout.bin"), client=client,
                    work_dir=str(folder / "encode-work"))  # fmt: skip
    bpe_dask.encode(str(folder / "a.txt"), tokenizer, str(folder / "shards"), client=client)  # .npy shards
    tokenizer.save(folder / "saved")


def _evaluate(folder: Path, client) -> None:
    bpe_dask.evaluate(str(folder / "a.txt"), [str(folder / "tok")], [300], out=str(folder / "eval"))


# Each command that writes an --out, and what writes it here (in this order: merge reads the counts).
WRITERS = {"train": _tokenizer, "count": _count, "merge": _merge, "encode": _encode, "evaluate": _evaluate}


@pytest.fixture(scope="module")
def folder(tmp_path_factory, client) -> Path:
    """``a.txt`` and what every job wrote from it, beside it; then copies of an output's files out of
    their folder, a report whose ids are gone, and what a killed job leaves behind (hidden names)."""
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "a.txt").write_text(corpus.words_corpus(5, 3000), encoding="utf-8")
    for write in WRITERS.values():
        write(folder, client)
    (folder / "loose").mkdir()
    for name in ("report.json", "compression.png", "compression.csv"):
        shutil.copy(folder / "tok" / name, folder / "loose" / name)
    shutil.copy(folder / "heldout.bin.json", folder / "old.bin.json")  # its .bin removed
    shutil.copy(folder / "heldout.bin", folder / ".partial-0123abcd-heldout.bin")  # a killed encode's
    (folder / ".tok.work-0123abcd" / "shards").mkdir(parents=True)  # a killed job's scratch space
    shutil.copy(next((folder / "count-work").rglob("*.parquet")), folder / ".tok.work-0123abcd" / "shards")
    return folder


def test_every_command_that_writes_is_here():
    """A new command with an --out joins ``WRITERS``, so what it writes is held to the listing."""
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    writing = {name for name, parser in commands.choices.items() if "--out" in parser._option_string_actions}
    assert writing == set(WRITERS)


@pytest.mark.parametrize("spec", ["{0}", "{0}/*", "{0}/**"], ids=["directory", "glob", "glob-all"])
def test_every_kind_of_output_is_skipped_with_one_line(folder, spec, caplog):
    """One line per input names a file or folder of each kind skipped, and what it is."""
    spec = spec.format(folder)
    with caplog.at_level(logging.INFO, logger="bpe_dask"):
        files = expand_inputs([spec])
    assert [f.url for f in files] == [(folder / "a.txt").as_uri()]
    lines = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"{spec}: skipping earlier bpe-dask outputs: "), lines
    said = ["heldout.bin (token ids bpe-dask encode wrote)", "(word counts bpe-dask count wrote)",
            "(the JSON bpe-dask writes beside ids)"]  # fmt: skip
    if spec != f"{folder}/*":  # what is inside folders, which a glob of one level does not reach
        said += ["eval/ (an evaluation)", "shards/ (encoded .npy shards)", "(a tokenizer)", "merged/",
                 "loose/compression.csv and 2 more (files of bpe-dask outputs)", "count-work/shards/",
                 "encode-work/encoded/", "(a work directory's encoded ids)"]  # fmt: skip
    if spec != str(folder):  # a glob finds hidden names, which a directory's listing hides
        said += [".partial-0123abcd-heldout.bin and 1 more (what a stopped bpe-dask job left)"]
    for words in said:
        assert words in lines[0], (words, lines[0])


def test_a_folder_of_outputs_trains_as_its_text_alone(folder, client, tmp_path):
    report = bpe_dask.train(str(folder), VOCAB_SIZE, str(tmp_path / "again"), [EOT], client=client)
    assert report["inputs"] == [(folder / "a.txt").as_uri()]
    assert read_reference_merges(tmp_path / "again" / "merges.txt") == read_reference_merges(
        folder / "tok" / "merges.txt"
    )
    assert Tokenizer.load(tmp_path / "again").vocab == Tokenizer.load(folder / "tok").vocab
    counts = bpe_dask.count_words(f"{folder}/**", [EOT], in_process=True).table()
    assert counts.equals(bpe_dask.count_words(str(folder / "a.txt"), [EOT], in_process=True).table())


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return commands.bpe_dask(*args, cwd=cwd, timeout=600)


def test_on_the_command_line(folder, tmp_path):
    """The line on stderr, once; the tokenizer the text alone gives."""
    args = ["--vocab-size", str(VOCAB_SIZE), "--special-token", EOT, "--out", "tok", "--workers", "1"]
    done = run_cli("train", str(folder), *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("skipping earlier bpe-dask outputs") == 1, done.stderr
    assert read_reference_merges(tmp_path / "tok" / "merges.txt") == read_reference_merges(
        folder / "tok" / "merges.txt"
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["train", "heldout.bin", "--vocab-size", "300"],
         "heldout.bin holds token ids bpe-dask encode wrote (as heldout.bin.json beside it says), not text"),
        (["count", "counts.parquet"],
         "counts.parquet holds word counts bpe-dask count wrote (bpe-dask merge reads them), not text"),
        (["count", "loose/*.json"],
         "no input files in {folder}/loose/*.json, only earlier bpe-dask outputs: report.json (files of"),
    ],
    ids=["ids", "counts", "only-outputs"],
)  # fmt: skip
def test_outputs_named_on_their_own_are_refused_in_one_line(folder, tmp_path, args, said):
    """Named on its own, a file is read as asked (a tokenizer's folder too: ``test_plan``), but ids and
    counts are not text; a glob that finds only outputs says so. Nothing is written."""
    command, inputs, *rest = args
    out = tmp_path / "out"
    done = run_cli(command, str(folder / inputs), *rest, "--out", str(out), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert said.format(folder=folder) in done.stderr, done.stderr
    assert os.listdir(tmp_path) == []
    with pytest.raises(BpeDaskError, match=r"not text|only earlier bpe-dask outputs"):
        expand_inputs([str(folder / inputs)])
