"""Shared test configuration.

Data-heavy tests read the read-only `../shared` folder through ONE configurable path:
`RASO_SHARED_DIR` (default: the `shared` folder next to this checkout). Where it is absent such
tests skip with a stated reason; `.ci/run` sets `RASO_REQUIRE_SHARED=1`, which turns that skip
into a failure so CI always runs them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

# litellm (imported by raso, gepa, textgrad) otherwise fetches its price map from the network at import time
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_root() -> Path:
    return Path(os.environ.get("RASO_SHARED_DIR", REPO_ROOT.parent / "shared")).resolve()


def require_shared(*parts: str) -> Path:
    """Return ../shared/<parts>, or skip (fail under RASO_REQUIRE_SHARED=1) when it is missing."""
    path = shared_root().joinpath(*parts)
    if not path.exists():
        reason = f"shared data not found at {path} (set RASO_SHARED_DIR to the shared folder)"
        if os.environ.get("RASO_REQUIRE_SHARED") == "1":
            pytest.fail(reason + "; RASO_REQUIRE_SHARED=1 makes this a failure", pytrace=False)
        pytest.skip(reason)
    return path


@pytest.fixture
def open_tmp_path():
    """A temporary folder every user can enter (pytest's tmp_path lies under a 0700 folder): a sandbox run by root
    drops to uid 65534, which must reach a rollout's folder and any program it binds."""
    folder = Path(tempfile.mkdtemp(prefix="raso-test-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def shared_dir() -> Path:
    return require_shared()


@pytest.fixture
def shared_corpus() -> Path:
    return require_shared("corpus")


@pytest.fixture
def shared_envdata() -> Path:
    return require_shared("envdata")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that start a Ray instance or a process cluster run last (in their usual order otherwise): Ray leaves
    threads in the test process after ray.shutdown(), and no later test should share a process with them."""
    items.sort(key=lambda item: item.get_closest_marker("cluster") is not None)
