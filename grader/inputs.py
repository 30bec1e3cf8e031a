"""A run's inputs: a function of (seed, test index in the spec, configuration index) alone, so
answers worked out ahead for a seed (grader.answer_pool) are the answers of a grade run with it."""
from __future__ import annotations

import numpy as np

from . import problems, sharedmem


def config_seed(seed: int, test_index: int, config_index: int) -> np.random.SeedSequence:
    """The seed sequence of one configuration: its inputs, then (spawned) its sampled checks."""
    return np.random.SeedSequence([seed, test_index, config_index])


def config_inputs(problem: str, config: dict, seq: np.random.SeedSequence) -> tuple[list[np.ndarray], dict]:
    return problems.make_inputs(problem, config, np.random.default_rng(seq))


def shared_config_inputs(problem: str, config: dict,
                         seq: np.random.SeedSequence) -> tuple[sharedmem.SharedInputs, dict]:
    """The same inputs, drawn straight into sealed memory the executor maps (grader.sharedmem):
    one copy in all, written once. The caller closes it (its arrays stay valid)."""
    return sharedmem.draw(lambda empty: problems.make_inputs(problem, config, np.random.default_rng(seq), empty))


def check_seed(seq: np.random.SeedSequence) -> np.random.SeedSequence:
    """The seed of a configuration's sampled checks (the downgrade check): its seed sequence's
    first child, named without spawning, so a grade and an answer set made ahead agree."""
    return np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, 0), pool_size=seq.pool_size)
