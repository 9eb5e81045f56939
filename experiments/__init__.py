"""RASO experiments: the paper's tables as resumable batches of cells, with GEPA and TextGrad baselines.

    raso experiment run experiments/configs/init_table.yaml
    python -c "from experiments import run_experiment; run_experiment('experiments/configs/init_table.yaml')"

Layers: experiments imports raso (and harnesses through raso's registry); raso never imports experiments.
"""

from __future__ import annotations

import os
from typing import Any

# gepa and textgrad import litellm themselves; without this, litellm's import fetches a price map from the network
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

_LAZY = {"run_experiment": ".runner", "ExperimentConfig": ".config", "load_experiment": ".config"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ExperimentConfig", "load_experiment", "run_experiment"]
