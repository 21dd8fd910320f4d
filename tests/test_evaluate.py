"""``bpe-dask evaluate``: compression on held-out text, held to ``len(Tokenizer.encode(text))`` of each
tokenizer cut to each vocabulary size (``Tokenizer.truncated``, itself held to training at that size),
for text files and records, in this process and on a LocalCluster, through the API and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import commands
import corpus
import numpy as np
import pytest

from bpe_dask import Tokenizer, evaluate, train_bpe
from bpe_dask import train as bpe_train
from bpe_dask.cli.main import main
from bpe_dask.jobs.evaluation import table
from bpe_dask.tokenizer import histogram
from conftest import CS336_DIR

EOT, PAD = "<|endoftext|>", "<|pad|>"
REPO = Path(__file__).resolve().parent.parent
# Held-out text unlike the training text: specials next to each other and inside words, CRLF, CJK,
# long runs (merged by the compiled merge's long path), digits, contractions.
HELD_OUT = {
    "a.txt": corpus.words_corpus(21, 3_000) + f"{EOT}{PAD}x{EOT}\r\n\r\n" + "a" * 300 + " 日本語 don't 12345",
    "b.txt": corpus.mixed_corpus(22, 8) + "=" * 40 + PAD + "tail without newline",
}
SIZES = [257, 300, 420]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory) -> dict[str, Path]:
    """Two tokenizer directories with different special tokens and split patterns (so the text is
    counted twice, each planned for its own cuts)."""
    folder = tmp_path_factory.mktemp("tokenizers")
    training = folder / "train.txt"
    training.write_bytes((corpus.words_corpus(1, 8_000) + corpus.mixed_corpus(2, 10)).encode())
    made = {}
    for name, specials, pattern, size in (("gpt2", [EOT], "gpt2", 500), ("gpt4", [EOT, PAD], "gpt4", 450)):
        vocab, merges = train_bpe(training, size, specials, pattern=pattern)
        Tokenizer(vocab, merges, specials, pattern).save(folder / name)
        made[name] = folder / name
    return made


@pytest.fixture(scope="module")
def held_out(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("held-out")
    for name, text in HELD_OUT.items():
        (folder / name).write_bytes(text.encode())
    return [folder / name for name in HELD_OUT]


def encoded_tokens(directory: Path, size: int | None, texts: list[str]) -> int:
    """Each text's ids by ``Tokenizer.encode`` (the readable engine), the tokenizer cut to ``size``."""
    tokenizer = Tokenizer.load(directory, engine="python")
    tokenizer = tokenizer if size is None else tokenizer.truncated(size)
    return sum(len(tokenizer.encode(text)) for text in texts)


def results(report: dict) -> dict[tuple[str, int], dict]:
    return {(r["tokenizer"], r["vocab_size"]): r for r in report["results"]}


def test_a_truncated_tokenizer_is_what_training_to_that_size_learns(tokenizers, tmp_path):
    text = corpus.words_corpus(3, 2_000)
    (tmp_path / "t.txt").write_text(text)
    whole_vocab, whole_merges = train_bpe(tmp_path / "t.txt", 400, [EOT])
    vocab, merges = train_bpe(tmp_path / "t.txt", 300, [EOT])
    cut = Tokenizer(whole_vocab, whole_merges, [EOT]).truncated(300)
    assert (cut.vocab, cut.merges) == (vocab, merges)


def test_the_histogram_is_of_the_merged_ids(tokenizers):
    words = [w.encode() for w in ["the", " the", "a" * 30, "b" * 400, "日本語", " x", "!", "don", "'t"]]
    counts = [3, 1, 2, 1, 5, 1, 1, 2, 7]
    offsets = np.cumsum([0, *map(len, words)])
    reference = Tokenizer.load(tokenizers["gpt2"], engine="python")
    expected = np.zeros(max(reference.vocab) + 1, np.int64)
    for word, count in zip(words, counts, strict=True):
        for token in reference.encode(word.decode()):
            expected[token] += count
    for engine in ("python", "numba"):
        tokenizer = Tokenizer.load(tokenizers["gpt2"], engine=engine)
        tally = histogram(tokenizer, b"".join(words), offsets, counts)
        assert tally.tolist() == expected.tolist()


def test_merges_that_do_not_nest_are_encoded_at_each_size(tmp_path):
    """``abc`` is one token whole, but three under the first merge alone, which needs ``bc``, made by
    the second: splitting the whole encoding back would say one."""
    vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"abc", 257: b"bc"}
    tokenizer = Tokenizer(vocab, [(b"a", b"bc"), (b"b", b"c")])
    (tmp_path / "t.txt").write_text("abc abc")
    report = evaluate(tmp_path / "t.txt", {"odd": tokenizer}, [257])
    assert [(r["vocab_size"], r["tokens"]) for r in report["results"]] == [(257, 7), (258, 3)]
    assert len(tokenizer.truncated(257).encode("abc abc")) == 7


@pytest.mark.parametrize(("engine", "where"), [("python", "here"), ("numba", "here"), ("auto", "cluster")])
def test_tokens_are_what_encode_gives_for_every_tokenizer_and_size(
    tokenizers, held_out, client, caplog, engine, where
):
    place = {"client": client, "chunk_size": "4KiB", "show_progress": True} if where == "cluster" else {}
    with caplog.at_level("INFO", "bpe_dask"):
        report = evaluate(held_out, [str(t) for t in tokenizers.values()], SIZES, engine=engine, **place)
    texts = list(HELD_OUT.values())
    text_bytes = sum(len(t.encode()) for t in texts)
    assert report["text_bytes"] == text_bytes and report["documents"] is None
    got = results(report)
    for directory in tokenizers.values():
        tokenizer = Tokenizer.load(directory)
        first, whole = 256 + len(tokenizer.special_tokens), len(tokenizer.vocab)
        for size in [s for s in SIZES if first <= s] + [whole]:  # gpt4's 2 special tokens: 257 is too few
            row = got.pop((str(directory), size))
            assert row["tokens"] == encoded_tokens(directory, size, texts), (directory.name, size)
            assert row["bytes_per_token"] == round(text_bytes / row["tokens"], 4)
    assert not got
    if where == "cluster":  # each tokenizer's text counted apart: planned for its own cuts
        tasks = report["partitions"] * 2
        assert report["partitions"] > len(held_out)
        ended = [m for m in caplog.messages if m.startswith("evaluate: 100%")]
        assert any(m.endswith(f", {tasks}/{tasks} partitions]") for m in ended), caplog.messages
    else:  # small, and no cluster asked for: measured here
        assert not any(m.startswith(("started a LocalCluster", "evaluate:")) for m in caplog.messages)


def test_records_give_tokens_per_document(tokenizers, tmp_path):
    documents = [text[k::4] for text in HELD_OUT.values() for k in range(4)] + [EOT, "", "aaaa"]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))
    report = evaluate(path, {"mine": tokenizers["gpt2"]}, [300])
    assert report["documents"] == len(documents)
    for row in report["results"]:
        tokens = encoded_tokens(tokenizers["gpt2"], row["vocab_size"], documents)
        assert row["tokens"] == tokens
        assert row["tokens_per_document"] == round(tokens / len(documents), 2)
    lines = table(report).splitlines()
    assert lines[0].split()[-1] == "tokens/doc"
    assert [line.split()[-1] for line in lines[1:]] == [
        f"{r['tokens_per_document']:.1f}" for r in report["results"]
    ]


def test_a_hugging_face_tokenizer_json_is_a_comparison_row(tmp_path, held_out):
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    hf = HFTokenizer(
        models.BPE.from_file(str(CS336_DIR / "gpt2_vocab.json"), str(CS336_DIR / "gpt2_merges.txt"))
    )
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens([EOT])
    hf.save(str(tmp_path / "gpt2.json"))
    report = evaluate(held_out, {"gpt2": tmp_path / "gpt2.json"}, [1000], in_process=True)
    texts = list(HELD_OUT.values())
    got = results(report)
    assert got["gpt2", 50257]["tokens"] == sum(len(hf.encode(t).ids) for t in texts)
    cut = Tokenizer.from_tokenizer_json(tmp_path / "gpt2.json").truncated(1000)
    assert got["gpt2", 1000]["tokens"] == sum(len(cut.encode(t)) for t in texts)


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return commands.bpe_dask("evaluate", *args, cwd=cwd)


def test_a_continued_tokenizer_is_measured_beside_its_base(tmp_path, held_out):
    """A tokenizer directory continued from a base (``init_from``) is measured at its base's size too,
    with no size asked (its ``report.json`` tells it): the base's own tokens on the held-out text, in
    a row marked as the base, in the report and in the table; a ``Tokenizer`` object has no base row."""
    (tmp_path / "base.txt").write_text(corpus.words_corpus(1, 4_000))
    (tmp_path / "more.txt").write_text(corpus.mixed_corpus(2, 10) + corpus.words_corpus(5, 2_000))
    bpe_train(tmp_path / "base.txt", 400, tmp_path / "base", [EOT])
    bpe_train(tmp_path / "more.txt", 480, tmp_path / "extended", init_from=tmp_path / "base")
    kept = len(Tokenizer.load(tmp_path / "base").vocab)
    base_alone = evaluate(held_out, [tmp_path / "base"])["results"][-1]  # the base itself, whole
    assert (base_alone["vocab_size"], base_alone["base"]) == (kept, False)
    report = evaluate(held_out, {"extended": tmp_path / "extended"}, [300])
    rows = [(r["vocab_size"], r["base"]) for r in report["results"]]
    assert rows == [(300, False), (kept, True), (480, False)]
    base_row = report["results"][1]
    assert (base_row["tokens"], base_row["bytes_per_token"]) == (
        base_alone["tokens"],
        base_alone["bytes_per_token"],
    )
    texts = list(HELD_OUT.values())
    assert base_row["tokens"] == encoded_tokens(tmp_path / "base", kept, texts)
    given = evaluate(held_out, {"extended": Tokenizer.load(tmp_path / "extended")})
    assert [(r["vocab_size"], r["base"]) for r in given["results"]] == [(480, False)]
    done = run(*map(str, held_out), "--tokenizer", "extended", "--vocab-sizes", f"{kept}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = [line.split() for line in done.stdout.splitlines()[1:]]
    assert printed == [
        [*name.split(), f"{r['vocab_size']}", f"{r['tokens']:,}", f"{r['bytes_per_token']:.3f}"]
        for name, r in zip(["extended (base)", "extended"], report["results"][1:], strict=True)
    ]


def test_the_command_prints_the_table_and_writes_the_evaluation(tokenizers, held_out, tmp_path):
    gpt2, gpt4 = str(tokenizers["gpt2"]), str(tokenizers["gpt4"])
    args = [*map(str, held_out), "--tokenizer", gpt2, "--tokenizer", gpt4,
            "--vocab-sizes", "300,257", "--out", "evaluation"]  # fmt: skip
    done = run(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["tokenizer", "vocab", "size", "tokens", "bytes/token"]
    texts = list(HELD_OUT.values())
    text_bytes = sum(len(t.encode()) for t in texts)
    printed = []
    for line in lines[1:]:
        name, size, tokens, per_token = line.split()
        tokens = int(tokens.replace(",", ""))
        size = int(size.replace(",", ""))
        whole = size == len(Tokenizer.load(name).vocab)
        assert tokens == encoded_tokens(Path(name), None if whole else size, texts)
        assert float(per_token) == pytest.approx(text_bytes / tokens, abs=5e-4)
        printed.append((name, size, tokens))
    assert [(n, s) for n, s, _ in printed] == [
        (gpt2, 257),
        (gpt2, 300),
        (gpt2, 500),
        (gpt4, 300),
        (gpt4, 450),
    ]
    written = json.loads((tmp_path / "evaluation" / "evaluation.json").read_text())
    assert [(r["tokenizer"], r["vocab_size"], r["tokens"]) for r in written["results"]] == printed
    assert (tmp_path / "evaluation" / "evaluation.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    again = run(*args, cwd=tmp_path)
    assert again.returncode == 1 and "--overwrite" in again.stderr


def test_the_plot_answers_which_size_as_compression_png_does(tmp_path):
    """``evaluation.png`` had a linear axis, which squashed the sizes under 4K, and no knee: the held-out
    knee is now marked and reported, by the definition ``compression.png`` uses (the first size from
    which 1,000 more tokens of vocabulary save under 1 % of the tokens), on a log axis."""
    import collections

    training = corpus.words_corpus(1, 30_000, vocab_words=3000)
    (tmp_path / "train.txt").write_text(training, encoding="utf-8")
    frequent = [word for word, _ in collections.Counter(training.split()).most_common(40)]
    (tmp_path / "held-out.txt").write_text(" ".join(frequent * 10), encoding="utf-8")  # merged early
    vocab, merges = train_bpe(tmp_path / "train.txt", 2800, [EOT])
    Tokenizer(vocab, merges, [EOT]).save(tmp_path / "tok")
    done = run("held-out.txt", "--tokenizer", "tok", "--vocab-sizes", "300,800,1300,1800,2300",
               "--out", "evaluation", "-q", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "evaluation" / "evaluation.json").read_text())
    tokens = {r["vocab_size"]: r["tokens"] for r in report["results"]}
    assert sorted(tokens) == [300, 800, 1300, 1800, 2300, 2800]  # every size 1,000 on is measured: exact
    knee = next(s for s in sorted(tokens) if tokens[s] - tokens[s + 1000] < 0.01 * tokens[s])
    assert report["tokenizers"]["tok"]["knee"] == knee == 800, tokens
    from bpe_dask.io.storage import Store
    from bpe_dask.jobs.evaluation import evaluation_figure  # what evaluation.png is drawn from

    axes = evaluation_figure(report, Store({})).axes[0]
    assert axes.get_xscale() == "log"
    labels = [t.get_text() for t in axes.get_xticklabels()]
    assert labels == ["300", "800", "1,300", "1,800", "2,300", "2,800"]  # the sizes measured
    marked = [line.get_xdata()[0] for line in axes.get_lines() if line.get_linestyle() == ":"]
    assert marked == [knee]
    assert any(text.get_text().startswith("800: 1,000 more save < 1%") for text in axes.texts)


@pytest.mark.parametrize(
    ("args", "fragment", "code"),
    [
        (["--tokenizer", "nowhere"], "tokenizer {tmp}/nowhere: no such directory", 1),
        (["--tokenizer", "nosuch/tokenizer.json"], "{tmp}/nosuch/tokenizer.json: no such directory", 1),
        (["--tokenizer", "{tok}", "--vocab-sizes", "256"], "vocabulary size 256 is smaller than {tok}'s", 1),
        (["--tokenizer", "{tok}", "--vocab-sizes", "300,5000"], "vocabulary size 5,000 is larger than", 1),
        (["--tokenizer", "{tok}", "--vocab-sizes", "lots"], "--vocab-sizes: not a vocabulary size", 2),
        ([], "--tokenizer is required", 2),
    ],
)
def test_mistakes_are_one_line(tokenizers, held_out, tmp_path, capsys, args, fragment, code):
    args = [a.format(tok=tokenizers["gpt2"], tmp=tmp_path) for a in args]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["evaluate", str(held_out[0]), *args, "--out", "out", "-q"]) == code
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bpe-dask: error: "), err
    assert fragment.format(tmp=tmp_path, tok=tokenizers["gpt2"]) in err[0]
    assert not (tmp_path / "out").exists()


def test_no_inputs_is_a_usage_error(tokenizers, capsys):
    assert main(["evaluate", "--tokenizer", str(tokenizers["gpt2"]), "-q"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "bpe-dask: error: INPUT is required (on the command line or in --config)"
    )


def test_a_config_file_gives_the_tokenizers_and_sizes(tokenizers, held_out, tmp_path, capsys):
    config = tmp_path / "evaluate.toml"
    paths = ", ".join(f'"{p}"' for p in held_out)
    config.write_text(f'inputs = [{paths}]\ntokenizers = ["{tokenizers["gpt2"]}"]\nvocab_sizes = [300]\n')
    assert main(["evaluate", "--config", str(config), "-q"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    texts = list(HELD_OUT.values())
    assert [int(r[2].replace(",", "")) for r in rows] == [encoded_tokens(tokenizers["gpt2"], s, texts)
                                                          for s in (300, None)]  # fmt: skip
    config.write_text(f'inputs = [{paths}]\ntokenizers = ["{tokenizers["gpt2"]}"]\nvocab_sizes = "300"\n')
    assert main(["evaluate", "--config", str(config), "-q"]) == 2
    assert "not a list of whole numbers" in capsys.readouterr().err


def test_an_empty_input_starts_no_cluster_and_gives_no_bytes_per_token(tokenizers, tmp_path, caplog):
    (tmp_path / "empty.txt").write_bytes(b"")
    with caplog.at_level("INFO", "bpe_dask"):
        report = evaluate(tmp_path / "empty.txt", [tokenizers["gpt2"]], [300], workers=2)
    assert [(r["tokens"], r["bytes_per_token"]) for r in report["results"]] == [(0, None), (0, None)]
    assert not any("LocalCluster" in m for m in caplog.messages)
    assert "the inputs hold no text (0 B)" in caplog.messages
