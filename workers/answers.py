"""The worker's answers made ahead (grader/answer_pool.py), as the settings configure them:
a grade draws a set; the pool is topped up at worker start, by the nightly job, and in the
background whenever a draw finds it low. Off (every grade works its answers out) unless
NKI_ANSWER_POOL_SIZE is set. A pool that fails is logged and the grade goes on without it."""
from __future__ import annotations

import logging
import threading

import grader
from store import specs
from store.db import session_scope

from . import settings

log = logging.getLogger(__name__)
_filling: set[str] = set()         # spec hashes this process is topping up now
_lock = threading.Lock()
_warned: list[bool] = []           # said once per process that the pool is off, and why


def made_ahead(conf: settings.Settings | None = None) -> bool:
    """Whether this worker's grades draw answers made ahead (the pool is on and can be hidden)."""
    conf = conf or settings.load()
    return conf.answer_pool_size > 0 and grader.answer_pool_is_private()


def pool(conf: settings.Settings | None = None):
    conf = conf or settings.load()
    if conf.answer_pool_size <= 0:
        return None
    if not grader.answer_pool_is_private():
        if not _warned:
            _warned.append(True)
            log.warning("answer pool off: NKI_ANSWER_POOL_SIZE is set, but this worker's sandbox cannot hide "
                        "the pool from kernels (run the worker as root)")
        return None
    return grader.AnswerPool(conf.answer_pool_dir, conf.answer_pool_size, conf.answer_pool_uses,
                             conf.answer_pool_max_age_s)


def draw(spec):
    """A set for this grade (None: the pool is off or empty), and a top-up started when low."""
    answers = pool()
    if answers is None:
        return None
    try:
        drawn = answers.draw(spec)
    except Exception:                                  # the grade can work its answers out itself
        log.warning("answer pool: no set drawn for %s", spec.assignment, exc_info=True)
        return None
    fill_in_background(spec)
    return drawn


def fill(spec) -> int:
    """Top the pool up for one spec now; how many sets were made."""
    answers = pool()
    if answers is None:
        return 0
    try:
        return answers.fill(spec)
    except Exception:
        log.warning("answer pool: could not fill for %s", spec.assignment, exc_info=True)
        return 0


def fill_in_background(spec) -> threading.Thread | None:
    """A daemon thread topping the pool up for `spec`, unless it is full or already being filled."""
    answers = pool()
    if answers is None:
        return None
    with _lock:
        if spec.spec_hash in _filling:
            return None
        try:
            if not answers.low(spec):
                return None
        except OSError:
            log.warning("answer pool: cannot look at %s", answers.root, exc_info=True)
            return None
        _filling.add(spec.spec_hash)

    def run():
        try:
            made = fill(spec)
            if made:
                log.info("answer pool: made %d set(s) for %s", made, spec.assignment)
        finally:
            with _lock:
                _filling.discard(spec.spec_hash)
    thread = threading.Thread(target=run, daemon=True, name=f"answer-pool-{spec.spec_hash[:8]}")
    thread.start()
    return thread


def fill_active() -> int:
    """Top the pool up for every active assignment's spec (worker start, the nightly job)."""
    if pool() is None:
        return 0
    from .nightly import active_specs
    with session_scope() as s:
        active = [specs.spec_by_hash(s, spec_hash) for spec_hash in active_specs()]
    return sum(fill(spec) for spec in active)
