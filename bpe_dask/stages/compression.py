"""The compression curve: what each merge saved in, the training data's tokens at every vocabulary size out.

Takes what the merge loop learned (the words' bytes times their counts, and the tokens each merge
saved: ``Merged``) and the special tokens the training data held (``SpecialsSeen``); gives, for
every vocabulary size from the bytes and special tokens up to the final one, how many tokens the
training data is under the first merges. It is exact, and free: a merge saves a number of tokens the
merge loop knows, and a special token is one token at every size. ``compression.csv`` holds it, and
``compression.png`` draws it, marking where each further 1,000 tokens of vocabulary buy less than
1 % fewer tokens, in the frame (``new_axes``, ``png``) that ``evaluation.png`` shares.

>>> curve = Curve(first_size=257, first_tokens=10, text_bytes=10, special_tokens=1, special_bytes=13,
...               savings=[3, 2])
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
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from bpe_dask import interrupts
from bpe_dask.io.written import CURVE_FILES as CURVE_FILES  # where every output's names are

T = TypeVar("T")
STEP, GAIN = 1000, 0.01  # the knee: where STEP more tokens of vocabulary save less than GAIN of the tokens


@dataclass(frozen=True)
class Curve:
    """The training data's tokens at each vocabulary size from ``first_size`` (the bytes, or a base's
    tokens, and the special tokens) on: ``first_tokens + special_tokens`` there, then less what each
    merge saved; ``text_bytes`` of text (and ``special_bytes`` of special tokens) in all."""

    first_size: int
    first_tokens: int
    text_bytes: int
    special_tokens: int
    special_bytes: int
    savings: list[int] = field(default_factory=list)

    def tokens(self) -> list[int]:
        """The tokens at each size, ``first_size`` first."""
        first = self.first_tokens + self.special_tokens
        return [first, *(first - np.cumsum(self.savings, dtype=np.int64)).tolist()]

    def rows(self) -> list[tuple[int, int, float]]:
        """``(vocab_size, tokens, bytes_per_token)`` at each size."""
        text_bytes = self.text_bytes + self.special_bytes
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
        ``gain`` of the training data's tokens, if the curve reaches that far (``knee_of``)."""
        tokens = self.tokens()
        return knee_of(range(self.first_size, self.first_size + len(tokens)), tokens, step, gain)


def knee_of(
    sizes: Sequence[int], tokens: Sequence[float], step: int = STEP, gain: float = GAIN
) -> int | None:
    """The knee of a curve of ``tokens`` at ascending vocabulary ``sizes``: the first of the sizes
    from which ``step`` more tokens of vocabulary save less than ``gain`` of the tokens there; None
    where the curve stops short of that. The one definition, for the training data's curve, which
    has every size, and for held-out text measured at a few (``evaluate``): there the tokens ``step``
    further on are read off the straight line between the sizes measured either side.

    >>> knee_of([1000, 2000, 4000, 8000], [500, 400, 398, 397])  # at 3,000, 399: 1 token saved of 400
    2000
    >>> knee_of([1000, 2000], [500, 400]) is None  # 2,000 more would be past the last size
    True
    """
    at, counts = np.asarray(sizes, np.int64), np.asarray(tokens, np.float64)
    if not len(at):
        return None
    reach = at + step <= at[-1]  # a prefix: the sizes ascend
    later = np.interp(at[reach] + step, at, counts)  # exact at a size measured
    hits = np.flatnonzero(counts[reach] - later < gain * counts[reach])
    return int(at[hits[0]]) if len(hits) else None


def mark_knee(axes: Any, knee: int, bytes_per_token: float, color: str) -> None:
    """The knee on a plot of bytes per token against vocabulary size: a dotted line, and what it means."""
    axes.axvline(knee, color=color, linestyle=":", linewidth=1)
    note = f"{knee:,}: {STEP:,} more save < {GAIN:.0%}"
    axes.annotate(
        note, (knee, bytes_per_token), textcoords="offset points", xytext=(6, -14), fontsize=8, color=color
    )


class Plotting(ThreadPoolExecutor):
    """``plot_curves``'s library (matplotlib: 0.6 s of Python, holding the GIL) loaded in a background
    thread, by drawing an empty picture, while a training job's cluster is up: ``early`` (a small
    input, whose counting is over sooner than the import) as the job starts, else once counting,
    which takes the GIL between blocks, is done (``start``), while the merge loop, which releases
    it, leaves a core free. The import is waited for before the cluster closes (``draw``, or
    leaving the ``with``, which shuts the pool down waiting: an import under way is finished, never
    left behind): a closing scheduler takes its directory out of ``sys.path``, and an import
    walking it then can miss a module."""

    def __init__(self, early: bool) -> None:
        super().__init__(1, thread_name_prefix="bpe-dask-plotting")
        self.loading = self.submit(plot_curves, {}) if early else None

    def start(self) -> None:
        self.loading = self.loading or self.submit(plot_curves, {})

    def draw(self, function: Callable[..., T], *args: object) -> Future[T]:
        """``function(*args)`` (which draws), in the background once the library has loaded; the
        wait for that is here, while the cluster is up."""
        self.start()
        interrupts.wait(self.loading.result)
        return self.submit(function, *args)


def new_axes(title: str) -> Any:
    """Empty axes of bytes per token against vocabulary size, titled and gridded, in a figure drawn to
    a buffer (``png``): the frame of ``compression.png`` and ``evaluation.png``."""
    import matplotlib

    matplotlib.use("Agg")  # no screen: draw to a buffer
    from matplotlib.figure import Figure

    axes = Figure(figsize=(7, 4.2), dpi=110).subplots()
    axes.set_xlabel("vocabulary size")
    axes.set_ylabel("bytes per token")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    return axes


def png(figure: Any) -> bytes:
    """A figure laid out, as a PNG."""
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def plot_curves(curves: Mapping[str, Curve]) -> bytes:
    """A PNG of bytes per token against vocabulary size, a line per curve, each curve's knee marked."""
    axes = new_axes("Compression of the training data")
    for label, curve in curves.items():
        rows = curve.rows()
        (line,) = axes.plot([r[0] for r in rows], [r[2] for r in rows], label=label, linewidth=1.6)
        knee = curve.knee()
        if knee is not None:
            mark_knee(axes, knee, rows[knee - curve.first_size][2], line.get_color())
    if len(curves) > 1:
        axes.legend()
    return png(axes.figure)
