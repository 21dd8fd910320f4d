import sys

from bpe_dask.cli.main import main

sys.exit(main())
