"""Which kindex the tests import: the source tree's (python/kindex, the default: ctest runs it with
KINDEX_LIBRARY naming build/lib/libkindex.so), or, with KINDEX_TEST_INSTALLED=1, the pip-installed package
(python/tests/run_device.sh)."""

import os
import sys
from pathlib import Path

if os.environ.get("KINDEX_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
