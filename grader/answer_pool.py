"""Reference answers made ahead of the grades that need them.

A run's inputs depend only on (spec, seed) (grader.inputs), and the kernel's code never sees a
value, so the answers can be worked out before a submission arrives. A pool keeps, per spec
content hash, a few secret *sets*: a fresh secret seed and the reference answer of every
configuration of every test for it. A grade draws one set at random (`secrets`) and runs with
its seed; its answers are then read from disk instead of computed beside the kernel.

On disk, in a directory only the grader's user may enter (0700; sandboxed children are also
given it as a hidden path, and the package view never shows it):

    <directory>/<spec hash>/<set id>/set.json   {set_id, seed, spec_hash, layout, created_at, uses}
    <directory>/<spec hash>/<set id>/<test>-<config>.npy
    <directory>/<spec hash>/.lock                    held while a set is drawn or pruned
    <directory>/<spec hash>/.filling                 held while a process makes sets

Beside each answer, what grader.downgrade compares an output with (the sampled output slices
and their answers from inputs rounded to each lower precision), which also depends on the seed
alone: `<test>-<config>.picks.npy` and `<test>-<config>.<precision>.npy`.

A set serves at most `uses` grades and is not drawn after `max_age_s`; both are enforced under
the lock, across every process sharing the directory. A set is made in a `.making-*` directory
and renamed into place whole, so a crash leaves no half set to draw (the pruner removes it).
A drawn set's arrays are memory-mapped before its directory may be removed, so a grade keeps
its answers when its draw used the set up.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import downgrade, problems
from .inputs import check_seed, config_inputs, config_seed
from .sandbox import FALLBACK, capabilities

META = "set.json"
SET_ID = re.compile(r"^[0-9a-f]{16}$")
STALE_MAKING_S = 6 * 3600        # a half-made set older than this was left by a dead process


def hidden_from_children() -> bool:
    """Can this machine keep every sandboxed child out of a pool? A root grader's children get
    a mount namespace (the pool is not in the package view; elsewhere it is covered like the
    job root), or, without namespaces, a uid of their own that the 0700 directory keeps out.
    A non-root grader's children run as its own uid on its own file system: no pool there."""
    caps = capabilities()
    return caps.mount or caps.unprivileged or (FALLBACK["uid"] and os.geteuid() == 0)


def layout(spec) -> str:
    """What a set's answers are keyed by: each test's name, problem and configurations, in order
    (a spec edited in code keeps its content hash, but answers must not go to other tests)."""
    tests = [[t.name, t.problem, [sorted(c.items()) for c in t.configs]] for t in spec.tests]
    return hashlib.sha256(json.dumps(tests, default=str).encode()).hexdigest()


@dataclass
class AnswerSet:
    """One drawn set: the seed a grade runs with, and its answers by (test index, config index)."""
    set_id: str
    seed: int
    spec_hash: str
    directory: str                               # the pool's root: no child may see it
    layout: str = ""                             # layout() of the spec it was made for
    answers: dict[tuple[int, int], np.ndarray] = field(default_factory=dict, repr=False)
    # (test index, config index) -> downgrade.lower_answers() for that configuration
    lower: dict[tuple[int, int], tuple] = field(default_factory=dict, repr=False)

    def answer(self, test_index: int, config_index: int) -> np.ndarray | None:
        return self.answers.get((test_index, config_index))

    def lower_answers(self, test_index: int, config_index: int) -> tuple | None:
        return self.lower.get((test_index, config_index))


class AnswerPool:
    def __init__(self, directory: str | os.PathLike, size: int, uses: int = 10, max_age_s: float = 86400.0) -> None:
        if size < 0 or uses < 1 or not max_age_s > 0:
            raise ValueError(f"an answer pool needs size >= 0, uses >= 1 and a positive max age; got size={size}, "
                             f"uses={uses}, max_age_s={max_age_s}")
        self.root = Path(directory).resolve()
        self.size, self.uses, self.max_age_s = size, uses, float(max_age_s)

    # ----- layout and locks -------------------------------------------------------------------
    def _spec_dir(self, spec) -> Path:
        if not re.fullmatch(r"[0-9a-f]{16,128}", spec.spec_hash or ""):
            raise ValueError(f"spec {spec.assignment!r} has no content hash to keep answers under")
        path = self.root / spec.spec_hash
        _private_dir(self.root)
        _private_dir(path)
        return path

    @contextlib.contextmanager
    def _locked(self, spec_dir: Path, name: str = ".lock", wait: bool = True):
        fd = os.open(spec_dir / name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def _sets(self, spec_dir: Path) -> list[tuple[Path, dict]]:
        found = []
        for entry in spec_dir.iterdir():
            if SET_ID.match(entry.name):
                try:
                    found.append((entry, json.loads((entry / META).read_text())))
                except (OSError, ValueError):
                    shutil.rmtree(entry, ignore_errors=True)       # not a set we wrote whole
        return found

    def _usable(self, meta: dict, spec) -> bool:
        return (meta.get("spec_hash") == spec.spec_hash and meta.get("layout") == layout(spec)
                and int(meta.get("uses", self.uses)) < self.uses
                and time.time() - float(meta.get("created_at", 0)) < self.max_age_s)

    def _prune(self, spec_dir: Path, spec) -> list[tuple[Path, dict]]:
        """Remove used-up, expired and stale half-made sets (the lock held); the usable ones."""
        keep = []
        for path, meta in self._sets(spec_dir):
            if self._usable(meta, spec):
                keep.append((path, meta))
            else:
                shutil.rmtree(path, ignore_errors=True)
        for entry in spec_dir.glob(".making-*"):
            with contextlib.suppress(OSError):
                if time.time() - entry.stat().st_mtime > STALE_MAKING_S:
                    shutil.rmtree(entry, ignore_errors=True)
        return keep

    # ----- what callers use -------------------------------------------------------------------
    def available(self, spec) -> int:
        """Sets a grade could draw now (pruning the rest)."""
        spec_dir = self._spec_dir(spec)
        with self._locked(spec_dir):
            return len(self._prune(spec_dir, spec))

    def draw(self, spec) -> AnswerSet | None:
        """A usable set chosen at random, its use counted; None when the pool has none."""
        spec_dir = self._spec_dir(spec)
        with self._locked(spec_dir):
            usable = self._prune(spec_dir, spec)
            if not usable:
                return None
            path, meta = secrets.choice(usable)
            answers, lower = _load(path)
            meta["uses"] = int(meta["uses"]) + 1
            if meta["uses"] >= self.uses:
                shutil.rmtree(path)         # the mapped arrays stay readable until this grade drops them
            else:
                _write_json(path / META, meta)
        return AnswerSet(set_id=meta["set_id"], seed=int(meta["seed"]), spec_hash=spec.spec_hash,
                         directory=str(self.root), layout=meta["layout"], answers=answers, lower=lower)

    def make_set(self, spec) -> str:
        """Work out one set (a fresh secret seed and every configuration's answer); its id."""
        spec_dir = self._spec_dir(spec)
        set_id = secrets.token_hex(8)
        seed = secrets.randbits(63)
        making = spec_dir / f".making-{set_id}"
        making.mkdir(mode=0o700)
        try:
            for test_index, test in enumerate(spec.tests):
                for config_index, config in enumerate(test.configs):
                    seq = config_seed(seed, test_index, config_index)
                    args, kwargs = config_inputs(test.problem, config, seq)
                    answer = problems.reference(test.problem, args, kwargs)
                    key = f"{test_index}-{config_index}"
                    _save_private(making / f"{key}.npy", answer)
                    lower = downgrade.lower_answers(test.problem, args, kwargs, answer.dtype,
                                                    np.random.default_rng(check_seed(seq)))
                    del args, answer
                    if lower is not None:
                        picks, lows = lower
                        _save_private(making / f"{key}.picks.npy", picks)
                        for name, low in lows.items():
                            _save_private(making / f"{key}.{name}.npy", low)
            _write_json(making / META, {"set_id": set_id, "seed": seed, "spec_hash": spec.spec_hash,
                                        "layout": layout(spec), "created_at": time.time(), "uses": 0})
            os.rename(making, spec_dir / set_id)
        except BaseException:
            shutil.rmtree(making, ignore_errors=True)
            raise
        return set_id

    def fill(self, spec) -> int:
        """Make sets until `size` are usable (at most `size` per call, so a max age shorter than
        making a set takes cannot keep it busy for ever); how many were made. One process fills
        a spec's pool at a time: another one filling it already, this returns 0 at once."""
        spec_dir = self._spec_dir(spec)
        made = 0
        with self._locked(spec_dir, ".filling", wait=False) as mine:
            if not mine:
                return 0
            while made < self.size and self.available(spec) < self.size:
                self.make_set(spec)
                made += 1
        return made

    def low(self, spec) -> bool:
        return self.available(spec) < self.size


def _load(path: Path) -> tuple[dict, dict]:
    """A set's answers and lower-precision answers, memory-mapped (read when a check needs them)."""
    arrays = {npy.name[:-len(".npy")]: np.asarray(np.load(npy, mmap_mode="r", allow_pickle=False))
              for npy in path.glob("*.npy")}
    answers, lower = {}, {}
    for name, array in arrays.items():
        if "." not in name:
            key = tuple(int(n) for n in name.split("-"))
            answers[key] = array
            if f"{name}.picks" in arrays:      # the precisions in the order the check tries them
                lows = {p: arrays[f"{name}.{p}"] for p, _ in downgrade.LOWER_PRECISIONS[array.dtype]}
                lower[key] = (np.array(arrays[f"{name}.picks"]), lows)
    return answers, lower


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)


def _save_private(path: Path, array: np.ndarray) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        np.save(fh, array, allow_pickle=False)


def _write_json(path: Path, data: dict) -> None:
    """Replaced whole (a reader never sees half a file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)
