"""Continued training (issue 42): a base tokenizer extended with merges learned on a corpus, every id
it had kept, held to the reference trainer started from the same base (``rules.reference``)."""

from __future__ import annotations

import json

import commands
import corpus
import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe
from tokenizers import Tokenizer as HFTokenizer

import bpe_dask
from bpe_dask import Tokenizer
from bpe_dask.rules import reference
from bpe_dask.stages.merge import train_merges
from conftest import CS336_DIR

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    """GPT-2's own vocabulary and merges: its bytes at ids 0-255 in an order of their own, 50,000
    merges, <|endoftext|> at 50,256."""
    return Tokenizer.from_files(CS336_DIR / "gpt2_vocab.json", CS336_DIR / "gpt2_merges.txt", [EOT])


@pytest.fixture(scope="module")
def multilingual() -> dict[bytes, int]:
    """The pre-token counts of text GPT-2 never saw much of: German, mixed scripts, odd words."""
    text = (CS336_DIR / "german.txt").read_text(encoding="utf-8") + corpus.mixed_corpus(7, 600)
    return reference.pretokenize([text], [EOT])


@pytest.mark.parametrize("engine", ["python", "numba"])
def test_gpt2_extended_keeps_every_id_and_learns_the_references_merges(gpt2, multilingual, engine):
    more = 300
    base = (gpt2.vocab, gpt2.merges)
    want = reference.train_on_counts(multilingual, len(gpt2.vocab) + more, [EOT], base=base)
    vocab, merges = train_merges(
        list(multilingual.items()), len(gpt2.vocab) + more, [EOT], engine=engine, base=gpt2.vocabulary
    )
    assert merges == want[1] and vocab == want[0]
    assert merges[:50_000] == gpt2.merges and len(merges) == 50_000 + more
    assert all(vocab[i] == token for i, token in gpt2.vocab.items())  # every id, <|endoftext|>'s included
    assert sorted(set(vocab) - set(gpt2.vocab)) == list(range(50_257, 50_257 + more))


# --- the jobs: bases of every kind, placements, the command line --------------------------------

GERMAN = CS336_DIR / "german.txt"


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("continued")
    path = folder / "corpus.txt"
    path.write_text(corpus.mixed_corpus(11, 300), encoding="utf-8")
    return path


@pytest.mark.parametrize("place", [{"in_process": True}, {"workers": 2, "engine": "numba"}])
def test_inheriting_n_merges_of_a_tokenizer_of_the_same_corpus_is_training_from_the_bytes(
    text_file, tmp_path, place
):
    """For N from 0 to all but the last (all: nothing left to learn, refused): the same merges.txt and
    vocab.json, byte for byte, as training from the bytes to the same size."""
    size = 256 + 1 + 120
    bpe_dask.train(str(text_file), size, tmp_path / "scratch", [EOT], in_process=True)
    scratch = {name: (tmp_path / "scratch" / name).read_bytes() for name in ("merges.txt", "vocab.json")}
    for n in (0, 1, 57, 119):
        out = tmp_path / f"from-{n}"
        report = bpe_dask.train(str(text_file), size, out, init_from=tmp_path / "scratch", inherit=n, **place)
        assert {name: (out / name).read_bytes() for name in scratch} == scratch, n
        assert report["inherited_merges"] == n and report["special_tokens"] == [EOT]


def test_a_base_of_each_kind_extends_alike(text_file, tmp_path):
    """A bpe-dask directory, its tokenizer.json, its tiktoken rank file (with the special token given,
    as the file holds none) and GPT-2-style files alone: the same merges, the reference's."""
    base_dir = tmp_path / "base"
    bpe_dask.train(str(GERMAN), 256 + 1 + 40, base_dir, [EOT], in_process=True)
    (tmp_path / "gpt2-style").mkdir()
    for name in ("vocab.json", "merges.txt"):
        (tmp_path / "gpt2-style" / name).write_bytes((base_dir / name).read_bytes())
    base = Tokenizer.load(base_dir)
    text = text_file.read_bytes().decode()  # its \r\n as they are (read_text makes them \n)
    want = reference.train([text], 256 + 1 + 100, [EOT], base=(base.vocab, base.merges))
    kinds = [base_dir, base_dir / "tokenizer.json", base_dir / "tokenizer.tiktoken", tmp_path / "gpt2-style"]
    for location in kinds:
        got = bpe_dask.train_bpe(str(text_file), 256 + 1 + 100, [EOT], init_from=location, in_process=True)
        assert got == want, location


def test_gpt2_extended_on_the_command_line_loads_in_the_peers_and_coarsens_its_tokens(tmp_path, gpt2):
    """Every old id kept, <|endoftext|> at 50,256; tiktoken and Hugging Face tokenizers encode as
    bpe_dask.Tokenizer does; and any text encodes to GPT-2's tokens with some neighbours joined."""
    (tmp_path / "gpt2").mkdir()
    for name, fixture in (("vocab.json", "gpt2_vocab.json"), ("merges.txt", "gpt2_merges.txt")):
        (tmp_path / "gpt2" / name).write_bytes((CS336_DIR / fixture).read_bytes())
    (tmp_path / "in.txt").write_text(corpus.mixed_corpus(5, 200), encoding="utf-8")
    args = ["in.txt", "--init-from", "gpt2", "--vocab-size", "50457", "--out", "ext", "--workers", "2"]
    done = commands.bpe_dask("train", *args, cwd=tmp_path, check=True)
    extended = Tokenizer.load(tmp_path / "ext")
    assert extended.special_ids == {EOT: 50_256} and extended.merges[:50_000] == gpt2.merges
    assert all(extended.vocab[i] == token for i, token in gpt2.vocab.items())
    assert len(extended.vocab) == 50_457 and "taken as special: <|endoftext|>" in done.stderr
    encoding = tiktoken.Encoding(
        "ext", pat_str=extended.pretokenizer.pattern.regex,
        mergeable_ranks=load_tiktoken_bpe(str(tmp_path / "ext" / "tokenizer.tiktoken")),
        special_tokens=extended.special_ids,
    )  # fmt: skip
    hf = HFTokenizer.from_file(str(tmp_path / "ext" / "tokenizer.json"))
    texts = [corpus.mixed_corpus(9, 20), (CS336_DIR / "address.txt").read_text(), GERMAN.read_text()]
    for text in texts:
        ids = extended.encode(text)
        assert encoding.encode(text, allowed_special="all") == ids and hf.encode(text).ids == ids
        assert _coarsens(extended, ids, gpt2, gpt2.encode(text))


def _coarsens(fine: Tokenizer, ids: list[int], coarse: Tokenizer, base_ids: list[int]) -> bool:
    """Whether each token of ``ids`` is a run of whole tokens of ``base_ids`` (the same text)."""
    ends, at = set(), 0
    for token in base_ids:
        at += len(coarse.vocab[token])
        ends.add(at)
    at = 0
    for token in ids:
        at += len(fine.vocab[token])
        if at not in ends:
            return False
    return True


def test_merge_from_counts_continues_from_a_base_as_train_does(text_file, tmp_path):
    base = tmp_path / "base"
    bpe_dask.train(str(GERMAN), 300, base, [EOT], in_process=True)
    bpe_dask.count_words(str(text_file), [EOT], out=str(tmp_path / "counts.parquet"), in_process=True)
    merged = bpe_dask.merge(tmp_path / "counts.parquet", 400, tmp_path / "merged", init_from=base)
    trained = bpe_dask.train(str(text_file), 400, tmp_path / "trained", init_from=base, in_process=True)
    for name in ("merges.txt", "vocab.json", "compression.csv"):
        assert (tmp_path / "merged" / name).read_bytes() == (tmp_path / "trained" / name).read_bytes()
    assert merged["inherited_merges"] == trained["inherited_merges"] == 300 - 257


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--init-from", "nowhere"], "nowhere: no such file or directory"),
        (["--init-from", "base", "--inherit", "999"], "--inherit 999 is not one of 0 to"),
        (["--inherit", "3"], "--inherit keeps merges of the tokenizer --init-from names"),
        (["--init-from", "base", "--vocab-size", "290"], "vocab size 290 is not above the 300 tokens"),
        (["--init-from", "gpt2", "--inherit", "10"], "its ids leave 266 free below its largest, 50,256"),
        (["--init-from", "odd/tokenizer.json"], "is not what its merges make of its bytes"),
        (["--init-from", "in.txt"], "is not a tokenizer directory, a tokenizer.json or a tiktoken rank file"),
    ],
)
def test_a_base_training_cannot_start_from_is_one_line_and_nothing_written(tmp_path, gpt2, args, says):
    (tmp_path / "in.txt").write_text(corpus.mixed_corpus(2, 20), encoding="utf-8")
    bpe_dask.train(str(GERMAN), 300, tmp_path / "base", [EOT], in_process=True)
    gpt2.save(tmp_path / "gpt2")  # with a tokenizer.json that says <|endoftext|> is special
    odd = json.loads((tmp_path / "base" / "tokenizer.json").read_text())
    odd["model"]["vocab"]["zz"] = 300  # a token no merge makes, not a special one
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "tokenizer.json").write_text(json.dumps(odd))
    size = [] if "--vocab-size" in args else ["--vocab-size", "50300"]
    done = commands.bpe_dask("train", "in.txt", *args, *size, "--out", "out", cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode in (1, 2) and len(lines) == 1 and says in lines[0], done.stderr
    assert not (tmp_path / "out").exists()


def test_on_workers_of_their_own_the_merge_on_a_worker_continues_from_the_base(text_file, tmp_path):
    """A `dask scheduler` and two `dask worker`s of two threads each, started in a folder of their own:
    the base is read on the client (a relative path there) and travels with the merge task to the
    worker that runs it; the merges are the reference's from that base."""
    import servers

    base = tmp_path / "base"
    bpe_dask.train(str(GERMAN), 300, base, [EOT], in_process=True)
    (tmp_path / "cluster").mkdir()
    want = reference.train([text_file.read_bytes().decode()], 420, [EOT],
                           base=(Tokenizer.load(base).vocab, Tokenizer.load(base).merges))  # fmt: skip
    with servers.dask_cluster(2, cwd=str(tmp_path / "cluster"), nthreads=2) as address:
        args = ["train", str(text_file), "--init-from", "base", "--vocab-size", "420", "--out", "tok",
                "--scheduler", address, "--merge-on", "worker", "--chunk-size", "8KiB"]  # fmt: skip
        done = commands.bpe_dask(*args, cwd=tmp_path, check=True)
    report = json.loads((tmp_path / "tok" / "report.json").read_text())
    assert report["merge_ran_on"] == "worker" and report["inherited_merges"] == 300 - 257, done.stderr
    assert report["partitions"] > 4
    extended = Tokenizer.load(tmp_path / "tok")
    assert extended.merges == want[1]
    assert extended.vocab == want[0]


def test_on_separate_machines_a_base_in_s3_is_extended_into_s3(text_file, tmp_path, s3, endpoint):
    """Corpus, base and output in S3, two workers of two threads on machines of their own (their
    folders, no AWS variables, the client's folders hidden where the system allows): the base is read
    on the client from S3 and travels with the merge task to a worker (the merge runs there: not an
    embedded cluster), and the tokenizer appears whole in S3 with the
    reference's merges from that base and nothing left beside it."""
    import servers

    bucket = "continued"
    s3.mkdir(bucket)
    base = tmp_path / "base"
    bpe_dask.train(str(GERMAN), 300, base, [EOT], in_process=True)
    s3.put(str(text_file), f"{bucket}/in.txt")
    s3.put(str(base), f"{bucket}/base", recursive=True)
    kept = Tokenizer.load(base)
    want = reference.train([text_file.read_bytes().decode()], 420, [EOT], base=(kept.vocab, kept.merges))
    client = tmp_path / "client"
    client.mkdir()
    env = {**servers.env_without_aws(), **servers.S3_ENV, "AWS_ENDPOINT_URL": endpoint}
    own = servers.WORKER_CREDENTIALS  # the workers' own credentials, as an instance role gives them
    with servers.separate_machines([tmp_path], 2, nthreads=2, worker_env_extra=own) as cluster:
        url = f"s3://{bucket}"
        args = ["train", f"{url}/in.txt", "--init-from", f"{url}/base", "--vocab-size", "420",
                "--out", f"{url}/tok", "--scheduler", cluster.address, "--chunk-size", "8KiB"]  # fmt: skip
        done = commands.bpe_dask(*args, cwd=client, environment=env, check=True)
        assert not any(cluster.files().values()), cluster.files()  # nothing on the workers' disks
    s3.invalidate_cache()
    assert sorted(s3.ls(bucket)) == [f"{bucket}/base", f"{bucket}/in.txt", f"{bucket}/tok"]
    s3.get(f"{bucket}/tok", str(tmp_path / "tok"), recursive=True)
    report = json.loads((tmp_path / "tok" / "report.json").read_text())
    assert report["merge_ran_on"] == "worker" and report["inherited_merges"] == 300 - 257, done.stderr
    assert report["partitions"] > 4
    extended = Tokenizer.load(tmp_path / "tok")
    assert (extended.merges, extended.vocab) == (want[1], want[0])
    assert not list(client.iterdir())
