"""The compression curve: what each merge saved in, the training data's tokens at every vocabulary size out.

Takes what the merge loop learned (the words' bytes times their counts, and the tokens each merge
saved: ``Merged``) and the special tokens the training data held (``SpecialsSeen``); gives, for
every vocabulary size from the bytes and special tokens up to the final one, how many tokens the
training data is under the first merges. It is exact, and free: a merge saves a number of tokens the
merge loop knows, and a special token is one token at every size. ``compression.csv`` holds it, and
``compression.png`` draws it, marking where each further 1,000 tokens of vocabulary buy less than
1 % fewer tokens.

>>> curve = Curve(first_size=257, byte_tokens=10, special_tokens=1, special_bytes=13, savings=[3, 2])
>>> print(curve.csv(), end="")
vocab_size,tokens,bytes_per_token
257,11,2.0909
258,8,2.875
259,6,3.8333
>>> curve.knee(step=1, gain=0.26)  # 2 tokens saved of 8: the first under 26 %
258
>>> curve.summary()
{'tokens': 6, 'bytes_per_token': 3.8333, 'special_tokens_seen': 1, 'knee': None}
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

CURVE_FILES = ("compression.csv", "compression.png")
T = TypeVar("T")
STEP, GAIN = 1000, 0.01  # the knee: where STEP more tokens of vocabulary save less than GAIN of the tokens


@dataclass(frozen=True)
class Curve:
    """The training data's tokens at each vocabulary size from ``first_size`` (bytes and special
    tokens) on: ``byte_tokens + special_tokens`` there, then less what each merge saved."""

    first_size: int
    byte_tokens: int
    special_tokens: int
    special_bytes: int
    savings: list[int] = field(default_factory=list)

    def tokens(self) -> list[int]:
        """The tokens at each size, ``first_size`` first."""
        return list(
            itertools.accumulate(
                self.savings,
                lambda tokens, saved: tokens - saved,
                initial=self.byte_tokens + self.special_tokens,
            )
        )

    def rows(self) -> list[tuple[int, int, float]]:
        """``(vocab_size, tokens, bytes_per_token)`` at each size."""
        text_bytes = self.byte_tokens + self.special_bytes
        return [
            (self.first_size + k, tokens, round(text_bytes / tokens, 4) if tokens else 0.0)
            for k, tokens in enumerate(self.tokens())
        ]

    def csv(self) -> str:
        lines = ["vocab_size,tokens,bytes_per_token", *(f"{v},{t},{b:g}" for v, t, b in self.rows())]
        return "\n".join(lines) + "\n"

    def summary(self) -> dict:
        """What ``report.json`` says of it: the final size's tokens and bytes per token, the special
        tokens seen, and the knee."""
        _, tokens, bytes_per_token = self.rows()[-1]
        return {
            "tokens": tokens,
            "bytes_per_token": bytes_per_token,
            "special_tokens_seen": self.special_tokens,
            "knee": self.knee(),
        }

    def knee(self, step: int = STEP, gain: float = GAIN) -> int | None:
        """The first vocabulary size from which ``step`` more tokens of vocabulary save less than
        ``gain`` of the training data's tokens, if the curve reaches that far."""
        tokens = self.tokens()
        for k in range(len(tokens) - step):
            if tokens[k] - tokens[k + step] < gain * tokens[k]:
                return self.first_size + k
        return None


def load_plotting() -> None:
    """Import what ``plot_curves`` uses, by drawing an empty picture (``Plotting`` says when)."""
    plot_curves({})


class Plotting:
    """``plot_curves``'s library (matplotlib: 0.6 s of Python, holding the GIL) loaded in a background
    thread while a training job's cluster is up: ``early`` (a small input, whose counting is over
    sooner than the import) as the job starts, else once counting, which takes the GIL between
    blocks, is done (``start``), while the merge loop, which releases it, leaves a core free.
    The import is waited for before the cluster closes (``draw``, or leaving the ``with``): a
    closing scheduler takes its directory out of ``sys.path``, and an import walking it then can
    miss a module."""

    def __init__(self, early: bool) -> None:
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="bpe-dask-plotting")
        self.loading = self.pool.submit(load_plotting) if early else None

    def start(self) -> None:
        self.loading = self.loading or self.pool.submit(load_plotting)

    def draw(self, function: Callable[..., T], *args: object) -> Future[T]:
        """``function(*args)`` (which draws), in the background once the library has loaded; the
        wait for that is here, while the cluster is up."""
        self.start()
        self.loading.result()
        return self.pool.submit(function, *args)

    def __enter__(self) -> Plotting:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True)  # an import under way is finished, never left behind


def plot_curves(curves: Mapping[str, Curve], title: str = "Compression of the training data") -> bytes:
    """A PNG of bytes per token against vocabulary size, a line per curve, each curve's knee marked."""
    import matplotlib

    matplotlib.use("Agg")  # no screen: draw to a buffer
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.2), dpi=110)
    axes = figure.subplots()
    for label, curve in curves.items():
        rows = curve.rows()
        (line,) = axes.plot([r[0] for r in rows], [r[2] for r in rows], label=label, linewidth=1.6)
        knee = curve.knee()
        if knee is not None:
            at = rows[knee - curve.first_size]
            axes.axvline(knee, color=line.get_color(), linestyle=":", linewidth=1)
            note = f"{knee:,}: {STEP:,} more save < {GAIN:.0%}"
            axes.annotate(
                note,
                (at[0], at[2]),
                textcoords="offset points",
                xytext=(6, -14),
                fontsize=8,
                color=line.get_color(),
            )
    axes.set_xlabel("vocabulary size")
    axes.set_ylabel("bytes per token")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    if len(curves) > 1:
        axes.legend()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
