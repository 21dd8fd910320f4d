"""The ``bpe-dask`` command (its console script) and ``python -m bpe_dask``: the command line, SIGINT
and SIGTERM answered from this module's first line.

Takes the process's arguments; gives ``cli.main.run``'s exit. Loading the command line takes
seconds (Dask, Arrow, numba), in which Python's own answer to Ctrl-C is a traceback from inside
some import, and to SIGTERM none at all; so a handler goes in first, here, before anything heavy:
until the command takes the signals itself (``interrupts.handled``), one ends the process at once,
with the command's one line and exit status (130, 143). Nothing needs undoing by then: no cluster,
no file, no child process. Only Python's own start, before this module runs, is out of reach.
"""

import contextlib
import os
import signal

EXITS = {signal.SIGINT: (b"bpe-dask: interrupted\n", 130), signal.SIGTERM: (b"bpe-dask: terminated\n", 143)}


def run() -> None:
    for signum in EXITS:
        signal.signal(signum, _stop)
    from bpe_dask.cli.main import run as command  # the heavy imports: a signal meanwhile is _stop's

    command()


def _stop(signum: int, frame: object) -> None:
    line, code = EXITS[signal.Signals(signum)]
    with contextlib.suppress(OSError):  # no stderr left to say it on: the exit status says it
        os.write(2, line)
    os._exit(code)


if __name__ == "__main__":
    run()
