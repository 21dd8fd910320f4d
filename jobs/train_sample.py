"""Train on the sample job: `bpe-dask train --config configs/sample.toml` plus any flags given.

python jobs/train_sample.py [--workers N] [--scheduler tcp://host:8786] [INPUT ...]
"""

import sys
from pathlib import Path

from bpe_dask.cli import main

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "sample.toml"

if __name__ == "__main__":
    sys.exit(main(["train", "--config", str(CONFIG), *sys.argv[1:]]))
