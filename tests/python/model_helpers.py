"""Shared by the tests of tessera.model: the runner's availability and the tiny config's checkpoints."""
import json
import os

import pytest

import tessera

try:
    from tessera.model import STEP_COMPONENTS, Model
    from tessera.model.random_checkpoint import write_random_checkpoint
except ImportError:
    STEP_COMPONENTS = Model = write_random_checkpoint = None

needs_runner = pytest.mark.skipif(Model is None or not hasattr(tessera._C, "Model"),
                                  reason="tessera.model.Model needs the native runner (_C.Model)")

TINY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "tessera", "model", "configs",
                    "tiny.json")


def tiny_checkpoint(tmp_path_factory, name: str, seed: int):
    """A random checkpoint of configs/tiny.json in a fresh folder: (path, config)."""
    with open(TINY) as f:
        config = json.load(f)
    path = tmp_path_factory.mktemp(name)
    write_random_checkpoint(config, path, seed=seed)
    return str(path), config
