import shutil
import tempfile

import pytest


@pytest.fixture
def node_dir():
    """The nodes' directory, short: a unix socket's path holds at most 107 bytes (pytest's
    tmp_path may be longer)."""
    d = tempfile.mkdtemp(prefix="nk-dm-")
    yield d
    shutil.rmtree(d, ignore_errors=True)
