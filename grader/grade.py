"""Grading one submission against one assignment spec: the pure core the CLI, the Celery
task and the web app all call. Student code only ever runs in sandboxed children."""
from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from nkisim.cost.generations import generation as cost_generation

from . import bands, downgrade, problems, scoring
from .answer_pool import AnswerSet, hidden_from_children
from .answer_pool import layout as answers_layout
from .blas import one_blas_thread
from .checks import check_output, layout_failure
from .errors import GraderInputError
from .events import CancelToken, ConfigEvent, ProgressEvent
from .inputs import check_seed, config_inputs, config_seed, shared_config_inputs
from .malloc import return_big_buffers
from .precheck import compute_violations
from .report import Report, TestResult
from .runner import ConfigRun, RunnerFault, RunnerJob, SimulatorFault, run_configuration, trace_configuration
from .sandbox import Limits, capabilities
from .spec import AssignmentSpec, TestSpec
from .static import static_findings

RESULT_PROGRAM_BYTES = 256 * 2**20    # a child's result beyond its outputs: ten times the largest honest program
from .submission import Submission
from .vocabulary import Backend, ReportStatus, TestStatus
from .zygote import ZYGOTE

GRADER_VERSION = "0.1.0"
ALWAYS_ALLOWED = {"dma_copy", "tensor_copy", "memset"}   # data movement, not compute


@dataclass
class GradeOptions:
    backend: str = "auto"                 # auto | sim | neuron
    seed: int | None = None               # public seed for local runs; None: fresh and secret
    jobs: int = 1                         # tests run in parallel
    on_progress: Callable[[ProgressEvent], None] | None = None   # called as each test finishes
    on_config: Callable[[ConfigEvent], None] | None = None       # called as each configuration finishes
    cancel: CancelToken | None = None     # set it to stop the grade (between configurations)
    time_budget_s: float | None = None    # wall time for the whole grade; None: the spec's
    config_timeout_s: float | None = None  # wall time for one configuration; None: the spec's
    neuron_cores: tuple[int, ...] = (0,)
    run_precheck: bool | None = None      # None: as the spec says
    limits: Limits = field(default_factory=Limits)   # per configuration; wall_seconds is also cut to the budget
    hide_paths: tuple[str, ...] = ()      # directories the child must not see (uploads, ...)
    answers: AnswerSet | None = None      # answers made ahead (grader.answer_pool): the run takes its seed
    threads: int | None = None            # the grade's share of the cores (reference answers' threads, executor processes); None: every usable core


def neuron_available() -> bool:
    """A Neuron device, a Neuron SDK line and what that line runs NEFFs with are all here."""
    from .neuron import NeuronUnavailable, detect
    try:
        detect()
    except NeuronUnavailable:
        return False
    return True


def usable_cores() -> int:
    """The cores this process may run on (its affinity; off Linux, the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _blas_text() -> str:
    """'OpenBLAS 0.3.31, SkylakeX kernels': what every process of the grade multiplied with."""
    from .jobs import blas_kernels
    kernels = blas_kernels()
    return f"{kernels[0]}, {kernels[1]} kernels" if kernels else ""


class BackendUnavailable(GraderInputError):
    """The backend asked for cannot run on this machine."""


def choose_backend(requested: str) -> str:
    if requested not in ("auto", Backend.SIM, Backend.NEURON):
        raise BackendUnavailable(f"unknown backend {requested!r}", "Use auto, sim or neuron.")
    if requested == "auto":
        return Backend.NEURON if neuron_available() else Backend.SIM
    if requested == Backend.NEURON:
        from .neuron import NeuronUnavailable, detect
        try:
            detect()
        except NeuronUnavailable as err:
            raise BackendUnavailable(f"the neuron backend cannot run here: {err.reason}", err.remedy) from None
    return requested


class _Run:
    """State of one grading run."""

    def __init__(self, submission: Submission, spec: AssignmentSpec, options: GradeOptions) -> None:
        self.sub, self.spec, self.opt = submission, spec, options
        self.backend = choose_backend(options.backend)
        self.neuron = None
        if self.backend == Backend.NEURON:
            from .neuron import check_dialect, check_platform, detect
            setup = detect()
            check_dialect(setup, spec)    # each line compiles one dialect: refuse the other's spec up front
            check_platform(setup, spec)   # and each chip times only the thresholds set on its generation
            if spec.lnc != 1:
                raise GraderInputError(
                    f"spec {spec.assignment!r} launches kernels on a logical NeuronCore of {spec.lnc} physical cores "
                    f"(lnc = {spec.lnc}); the Trainium path grades kernels written for one core only so far (it "
                    f"compiles and loads each at this worker's runtime degree, LNC={setup.lnc}, {setup.lnc_source})",
                    remedy="grade this spec on the simulator (--backend sim), or use a spec without lnc")
            self.neuron = setup.job_fields()
        self.answers = options.answers
        if self.answers is not None and options.seed is not None:
            raise GraderInputError("a grade takes a seed or a set of answers made ahead, not both",
                                   "Drop the seed: the answer set's own seed grades the run.")
        if self.answers is not None and not hidden_from_children():
            raise GraderInputError("this machine cannot hide an answer pool from the kernel's process",
                                   "Grade as root (namespaces), or without answers made ahead.")
        made_for = (self.answers.spec_hash, self.answers.layout) if self.answers is not None else None
        if made_for is not None and made_for != (spec.spec_hash, answers_layout(spec)):
            raise GraderInputError("the answer set was made for another version of this spec",
                                   "Draw a set from the pool for this spec's content hash.")
        self.seed = (self.answers.seed if self.answers is not None else
                     options.seed if options.seed is not None else secrets.randbits(63))
        # where the answer set lives: hidden from every child like the job root
        self.hidden = tuple(self.opt.hide_paths) + ((self.answers.directory,) if self.answers is not None else ())
        self.cancel = options.cancel or CancelToken()
        self.cancel_event = self.cancel.event          # handed to the sandbox: set, it kills children
        self.budget_s = float(options.time_budget_s if options.time_budget_s is not None else spec.time_budget_s)
        if not self.budget_s > 0:
            raise GraderInputError(f"the time budget must be positive, got {self.budget_s:g} s",
                                   "Give a time budget in seconds above 0 (or none, for the spec's).")
        self.deadline = time.monotonic() + self.budget_s
        self.root = _job_root()
        self.base = tempfile.mkdtemp(prefix="run-", dir=self.root)
        self.flags: list[str] = []
        self.results: dict[str, TestResult] = {}
        self.rejected: set[str] = set()                  # file keys the static check refused
        self.rejections: list[dict] = []
        self.warnings: list[dict] = []
        self.timeouts: dict[tuple[str, str], str] = {}   # (file, kernel) -> the message its timeout gave
        self.kernel_ran_ok: set[tuple[str, str]] = set()  # kernels that produced an output once
        self.budget_cut: list[str] = []                  # tests the budget left unrun
        self.order: list[TestSpec] = []                  # the order tests run in, one at a time
        self.ahead: _Tracing | None = None               # the next configuration's trace (and inputs), begun early
        # the last program traced and run, by what tracing saw: a configuration with the same
        # signature (a test's inputs drawn again, the bias test after the plain one) runs it again
        self.last_traced: tuple[tuple, tuple] | None = None
        self.lock = threading.Lock()
        self.done = 0
        self.cores = list(options.neuron_cores)
        capabilities()    # probe once, before worker threads start
        ZYGOTE.warm()

    # ----- static checks -------------------------------------------------------------
    def prechecks(self) -> None:
        enabled = self.spec.precheck if self.opt.run_precheck is None else self.opt.run_precheck
        if not enabled:
            return
        key_of = {self.sub.filenames.get(key, key): key for key in self.sub.files}
        for found in static_findings(self.sub, self.spec, enabled=True):
            severity = found.pop("severity")
            if severity == "warning":
                self.warnings.append(found)
            else:
                self.rejections.append(found)
                self.rejected.add(key_of[found["file"]])
        for key in self.sub.files:
            if key in self.rejected:
                self.flags.append(f"precheck_rejected:{key}")

    # ----- time budget -----------------------------------------------------------------
    def _remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def _per_config_s(self) -> float:
        timeout = self.opt.config_timeout_s if self.opt.config_timeout_s is not None else self.spec.config_timeout_s
        return min(self.opt.limits.wall_seconds, timeout)

    def _config_limits(self, input_bytes: int = 0) -> Limits:
        """The child's limits for the next configuration: the configured ones (and the spec's
        per-configuration timeout), with the wall clock cut to what is left of the budget and
        the result cut to what this configuration can honestly need: a program (a million
        instructions encode to about 26 MiB) and outputs no larger than the inputs, with margin."""
        wall = min(self._per_config_s(), max(0.0, self._remaining_s()))
        result = min(self.opt.limits.result_bytes, RESULT_PROGRAM_BYTES + 2 * input_bytes)
        return dataclasses.replace(self.opt.limits, wall_seconds=wall, result_bytes=result)

    def _timeout_message(self, test: TestSpec, label: str, limits: Limits) -> str:
        """What a timed-out configuration says; every later test of the same kernel repeats it."""
        if limits.wall_seconds < self._per_config_s():
            why = f"when the submission's {self.budget_s:g} s time budget ran out"
        else:
            why = "the limit for one configuration"
        return (f"{test.kernel} was stopped after {limits.wall_seconds:.0f} s, {why}, in {test.title} "
                f"({label}); every later test that runs it fails with this message. Look for a loop "
                f"that never ends, or work far beyond what the problem needs.")

    def _threads(self) -> int:
        """This grade's share of the cores (a worker running several grades at once says how
        many), by default every usable core (shared by --jobs tests at once): the threads its
        reference answers' blocks are spread over, and the processes its executor may split a
        program over (nkisim.split). Both run at once and share them; each thread or process
        keeps one BLAS thread."""
        return self.opt.threads or max(1, usable_cores() // max(1, self.opt.jobs))

    def _reference_answer(self, test: TestSpec, index: int, config: dict, args: list[np.ndarray], kwargs: dict,
                          check_seq: np.random.SeedSequence):
        """A future of (the reference answer, what the downgrade check compares with, or None:
        the check works it out itself). Both made ahead when the run drew an answer set; else
        worked out beside the child once this kernel has produced an output in this grade, each
        on its own threads (the check's answers take one; waiting for them after the answer left
        a core idle), and before that only the answer, when asked for, so a kernel that fails at
        once costs no reference work (a 224x224 answer takes seconds of CPU)."""
        ti = self.spec.tests.index(test)
        made = self.answers.answer(ti, index) if self.answers is not None else None
        if made is not None:
            return _Ready((made, self.answers.lower_answers(ti, index)))
        if (test.file, test.kernel) in self.kernel_ran_ok:
            dtype = np.dtype(problems.output(test.problem, config)[1])      # the answer's
            lower = _Background(lambda: downgrade.lower_answers(test.problem, args, kwargs, dtype,
                                                                np.random.default_rng(check_seq)),
                                name="lower-answers")

            def both():
                return problems.reference(test.problem, args, kwargs, threads=self._threads()), lower.result()
            return _Background(both)
        return _Deferred(lambda: (problems.reference(test.problem, args, kwargs, threads=self._threads()), None))

    # ----- one test ------------------------------------------------------------------------
    def run_test(self, test: TestSpec) -> TestResult:
        start = time.monotonic()
        result = self._run_test(test)
        result.duration_s = round(time.monotonic() - start, 3)
        with self.lock:
            self.done += 1
            event = ProgressEvent(done=self.done, total=len(self.spec.tests), result=result)
        if self.opt.on_progress:
            self.opt.on_progress(event)
        return result

    def _result(self, test: TestSpec, status: str, points: float, message: str, **kw) -> TestResult:
        return TestResult(name=test.name, kind=test.kind, status=status, points=points, max_points=test.points,
                          title=test.title, file=self.spec.files[test.file].filename,
                          thresholds_us=test.thresholds_us, message=message, **kw)

    def _not_run(self, test: TestSpec) -> TestResult | None:
        """The result of a test that must not run (and why), or None when it may run."""
        if self.cancel_event.is_set():
            return self._result(test, TestStatus.SKIPPED, 0.0, f"not run: grading was {self.cancel.reason}",
                                details={"not_run": self.cancel.reason})
        if test.file not in self.sub.files:     # the header says so once; the test scores 0
            return self._result(test, TestStatus.SKIPPED, 0.0, "", details={"not_run": "not_submitted"})
        if test.file in self.rejected:           # the header lists every violation once
            return self._result(test, TestStatus.ERROR, 0.0, "", details={"not_run": "rejected"})
        failed_gates = [g for g in test.gated_by if self.results.get(g) is None or self.results[g].status != TestStatus.PASSED]
        if failed_gates:
            titles = {t.name: t.title or t.name for t in self.spec.tests}
            return self._result(test, TestStatus.SKIPPED, 0.0, "not run: these tests must pass first: "
                                + "; ".join(titles.get(g, g) for g in failed_gates),
                                details={"not_run": "gated"})
        timed_out = self.timeouts.get((test.file, test.kernel))
        if timed_out:
            return self._result(test, TestStatus.ERROR, 0.0, timed_out, details={"not_run": "timed_out"})
        if self._remaining_s() < 1.0:
            with self.lock:
                self.budget_cut.append(test.name)
            return self._result(test, TestStatus.ERROR, 0.0, f"not run: the submission's time budget of {self.budget_s:g} s "
                                                     f"was used up by the tests before it",
                                details={"not_run": "budget"})
        return None

    def _run_test(self, test: TestSpec) -> TestResult:
        stop = self._not_run(test)
        if stop is not None:
            self._let_go(test)
            return stop
        if test.compute_only is not None:
            bad = compute_violations(self.sub.files[test.file], test.kernel, set(test.compute_only))
            if bad:
                return self._result(test, TestStatus.FAILED, 0.0, f"line {bad[0].line}: {bad[0].message}")
        details: dict = {"configs": []}
        outputs_text = []
        p99s = []
        profile = slowest = None
        for index, config in enumerate(test.configs):
            if index and (stop := self._not_run(test)) is not None:    # between configurations
                self._let_go(test)
                stop.details["configs"] = details["configs"]
                return stop
            started = time.monotonic()
            outcome = self._run_config(test, index, config)
            if self.opt.on_config and not self.cancel_event.is_set():
                self.opt.on_config(ConfigEvent(test.title, index + 1, len(test.configs),
                                               problems.label(test.problem, config), outcome["status"], round(time.monotonic() - started, 1)))
            if self.cancel_event.is_set():      # the child was killed for the cancel, not by its fault
                return self._result(test, TestStatus.SKIPPED, 0.0, f"not finished: grading was {self.cancel.reason}",
                                    details={"not_run": self.cancel.reason, **details})
            details["configs"].append(outcome["detail"])
            if outcome.get("output"):
                outputs_text.append(outcome["output"])
            if outcome.get("timed_out"):
                with self.lock:
                    self.timeouts.setdefault((test.file, test.kernel), outcome["message"])
                return self._result(test, TestStatus.ERROR, 0.0, self.timeouts[(test.file, test.kernel)], details=details,
                                    output="\n".join(outputs_text))
            if outcome["status"] != TestStatus.PASSED:
                self._let_go(test)            # its later configurations do not run
                return self._result(test, outcome["status"], 0.0, outcome["message"], details=details,
                                    output="\n".join(outputs_text))
            self.kernel_ran_ok.add((test.file, test.kernel))
            if outcome.get("p99_us") is not None:
                if not p99s or outcome["p99_us"] > max(p99s):
                    slowest = outcome.get("profile")    # the p99 counted is this configuration's
                p99s.append(outcome["p99_us"])
            if outcome.get("profile") is not None:
                profile = outcome["profile"]
        output = "\n".join(outputs_text)
        if not test.timed:
            return self._result(test, TestStatus.PASSED, test.points, "all configurations match the reference",
                                details=details, output=output)
        if profile is not None:
            details["profile"] = profile
        p99 = max(p99s)
        # a simulated p99 carries the model's error band for kernels of its class (grader.bands)
        banded = bands.band_of(slowest) if self.backend == Backend.SIM else None
        if banded is not None:
            details["band"], details["bound"] = banded
        band = banded[0] if banded else None
        points, status, message, credited = scoring.timed_verdict(
            test, p99, self.spec.partial_credit, band, self.spec.borderline)
        roof = max(problems.roofline_us(test.problem, c, self.spec.platform) for c in test.configs)
        details["roofline_us"] = roof
        self.flags += scoring.timed_flags(test, p99, band, credited, roof, self.spec)
        return self._result(test, status, points, message, p99_us=round(p99, 3), details=details, output=output)

    # ----- one configuration: traced in a sandboxed child, executed by a trusted process -----------
    def _run_config(self, test: TestSpec, index: int, config: dict) -> dict:
        seq = config_seed(self.seed, self.spec.tests.index(test), index)
        # tracing needs no input value: on the simulator it starts before the inputs are drawn (or
        # began while the configuration before ran), and the executor once both are done
        tracing = self._take_trace(test, index, config)
        # the simulator's inputs are drawn straight into the sealed memory its executor maps: the
        # one copy, which the reference answer below is worked out from as well
        shared = None
        try:
            if self.backend == Backend.SIM:
                if tracing is not None and tracing.drawn is not None:     # drawn while the one before ran
                    shared, kwargs = tracing.drawn.result()
                else:
                    shared, kwargs = shared_config_inputs(test.problem, config, seq)
                args = shared.arrays
            else:
                args, kwargs = config_inputs(test.problem, config, seq)
            if tracing is not None and ([(a.shape, a.dtype) for a in args] != tracing.specs or kwargs != tracing.kwargs):
                raise RuntimeError(f"{test.problem}'s signature is not what its inputs are drawn as")
            limits = self._config_limits(sum(a.nbytes for a in args))
            check_seq = check_seed(seq)           # the downgrade check's samples
            # the answer is worked out here, in the grader's process (beside the run once the kernel has run)
            expected_future = self._reference_answer(test, index, config, args, kwargs, check_seq)
            traced = tracing.background.result() if tracing is not None else None
            if traced is not None and not isinstance(traced, ConfigRun):
                if self.opt.jobs <= 1:            # tests one at a time: the next may run it again
                    self.last_traced = (tracing.seen_as, traced)
                self._trace_next(test, index)     # traced while this one executes
            elif isinstance(traced, ConfigRun):
                limits = tracing.limits          # what the tracing child ran under, for its messages
            # begun while the one before was checked; None when the grade's cancel came before it started
            run = tracing.launched.result() if tracing is not None and tracing.launched is not None else None
            if run is not None and not isinstance(traced, ConfigRun):
                limits = tracing.launched_limits
            if run is None:
                job = dataclasses.replace(self._inputs_job(test, index, config, len(args)),
                                          args=args, kwargs=kwargs, shared_inputs=shared)
                run = run_configuration(job, limits, self.cancel_event, traced=traced)
        except BaseException:
            if tracing is not None:
                tracing.discard()             # its child is killed: nobody will read what it traced
            raise
        finally:
            if shared is not None:
                shared.close()          # the arrays stay readable
        if run.status == "ok":
            self._launch_next()           # it executes while this one's output is checked
        label = problems.label(test.problem, config)
        detail = {"config": label, "wall_s": run.wall_s}
        output = "\n".join(part for part in (run.child_output, run.printed) if part)
        base = {"detail": detail, "output": output[-2000:]}
        if run.status == "simulator_error":     # ours: no test status, the whole grade fails
            raise SimulatorFault(f"{test.name}, {label}: nkisim failed to execute the kernel's valid program: "
                                 f"{run.message}")
        if run.status == "grader_error":        # the worker's: the same
            raise RunnerFault(f"{test.name}, {label}: this worker could not run the kernel's NEFF: {run.message}")
        if run.status == "timeout":
            return dict(base, status=TestStatus.ERROR, message=self._timeout_message(test, label, limits), timed_out=True)
        if run.status == "invalid":
            self.flags.append(f"program_invalid:{test.name}")
            return dict(base, status=TestStatus.ERROR, message=f"{label}: {run.message}")
        what = "performance run output is wrong, so this test earns no points" if test.timed else "wrong output"
        if run.status == "mismatch":      # what tracing knew: the program was not executed
            detail["stopped_after"] = "tracing"
            if len(run.declared) != 1:
                return dict(base, status=TestStatus.FAILED, message=f"{label}: the kernel returned {len(run.declared)} outputs, expected 1")
            shape, dtype = problems.output(test.problem, config)
            layout = layout_failure(*run.declared[0], shape, dtype.name)
            if layout is not None:
                return dict(base, status=TestStatus.FAILED, message=f"{label}: {what}: {layout.message}")
            return dict(base, status=TestStatus.ERROR, message=f"{label}: the program was not executed, yet its output is the expected one")
        if run.status != "ok":
            return dict(base, status=TestStatus.ERROR, message=f"{label}: {run.message}")
        if len(run.outputs) != 1:
            return dict(base, status=TestStatus.FAILED, message=f"{label}: the kernel returned {len(run.outputs)} outputs, expected 1")
        expected, made = expected_future.result()
        actual = run.outputs[0]
        if self.backend == Backend.NEURON:
            from .neuron import as_expected       # nrtpy reads some outputs back as raw bytes
            actual = as_expected(actual, expected)
        tol = self.spec.tolerance(expected.dtype)     # timed runs as strictly as correctness runs
        check = check_output(actual, expected, tol["rtol"], tol["atol"])
        detail["max_abs_error"] = check.max_abs_error
        if not check.ok:
            return dict(base, status=TestStatus.FAILED, message=f"{label}: {what}: {check.message}")
        downgraded = downgrade.check(test.problem, args, kwargs, run.outputs[0], expected,
                                     np.random.default_rng(check_seq), made)
        if downgraded:
            return dict(base, status=TestStatus.FAILED, message=f"{label}: {downgraded}")
        if test.compute_only is not None:
            extra = set(run.opcodes) - set(test.compute_only) - ALWAYS_ALLOWED
            if extra:
                return dict(base, status=TestStatus.FAILED,
                            message=f"{label}: only {', '.join(test.compute_only)} may compute here, but the kernel "
                                    f"used {', '.join(sorted(extra))}")
        if not test.timed:
            return dict(base, status=TestStatus.PASSED, message="ok")
        return self._timed(test, config, label, run, base)

    def _job(self, test: TestSpec, index: int, config: dict) -> RunnerJob:
        """A configuration's job, without its inputs."""
        fspec = self.spec.files[test.file]
        return RunnerJob(backend=self.backend, filename=fspec.filename, source=self.sub.files[test.file],
                         function=test.kernel, args=[], kwargs={},
                         mode="benchmark" if test.timed else "correctness", warmup=test.warmup, iters=test.iters,
                         platform=self.spec.platform, job_root=self.base, hide_paths=(self.root,) + self.hidden,
                         neuron_core=self.cores[index % len(self.cores)] if self.backend == Backend.NEURON else None,
                         neuron=self.neuron, thresholds_us=test.thresholds_us,
                         expected_output=problems.output(test.problem, config), processes=self._threads(),
                         dialect=self.spec.dialect, lnc=self.spec.lnc)

    def _inputs_job(self, test: TestSpec, index: int, config: dict, count: int) -> RunnerJob:
        """A configuration's job with the names of its `count` inputs, still without their values."""
        names = self.spec.files[test.file].functions[test.kernel][:count]
        return dataclasses.replace(self._job(test, index, config), input_names=names)

    def _start_trace(self, test: TestSpec, index: int, config: dict) -> _Tracing | None:
        """Begin tracing a configuration from its signature (None: the problem has none, or the
        backend is not the simulator); its child runs under that configuration's own limits."""
        signature = problems.signature(test.problem, config) if self.backend == Backend.SIM else None
        if signature is None:
            return None
        specs, kwargs = signature
        signed = [(tuple(int(n) for n in shape), np.dtype(dtype)) for shape, dtype in specs]
        limits = self._config_limits(_signature_bytes(signed))
        # all that tracing is given (job.json holds no more): the same, it traces the same program
        seen_as = (test.file, test.kernel, tuple(signed), json.dumps(kwargs, sort_keys=True), limits)
        stop = threading.Event()
        if self.last_traced is not None and self.last_traced[0] == seen_as:
            artifact, child = self.last_traced[1]
            again = (artifact, dataclasses.replace(child, wall_seconds=0.0, cpu_seconds=0.0))   # not traced twice
            return _Tracing((test.name, index), _Background(lambda: again, name="trace"), stop, limits, signed,
                            kwargs, seen_as, test=test, config=config)
        job = dataclasses.replace(self._inputs_job(test, index, config, len(specs)), kwargs=kwargs, arg_specs=specs)
        background = _Background(lambda: trace_configuration(job, limits, _EitherSet(self.cancel_event, stop)),
                                 name="trace")
        return _Tracing((test.name, index), background, stop, limits, signed, kwargs, seen_as, test=test, config=config)

    def _take_trace(self, test: TestSpec, index: int, config: dict) -> _Tracing | None:
        """This configuration's trace: begun early if it was the one expected next, else now (one
        begun for a configuration that is not run is killed, and the inputs drawn for it let go)."""
        ahead, self.ahead = self.ahead, None
        if ahead is not None and ahead.key == (test.name, index):
            return ahead
        if ahead is not None:
            ahead.discard()
        return self._start_trace(test, index, config)

    def _trace_next(self, test: TestSpec, index: int) -> None:
        """Begin tracing the configuration that runs next (when tests run one at a time), so its
        child traces while this one's executes, and drawing its inputs beside them (a 224x224
        batch's take 0.2 s of one core, which this run's executor seldom keeps busy throughout);
        both are let go should that one not run after all. Inputs are drawn in the grader's
        process as always, into memory no child holds until its executor is given it; the price
        is one configuration's inputs held beside this one's."""
        if self.opt.jobs > 1 or test not in self.order:
            return
        if index + 1 < len(test.configs):
            after, at = test, index + 1
        else:       # the next test of a file that was sent and passed the precheck (not part 1's when only part 2 was sent)
            after = next((t for t in self.order[self.order.index(test) + 1:]
                          if t.file in self.sub.files and t.file not in self.rejected and t.configs), None)
            if after is None:
                return
            at = 0
        config = after.configs[at]
        self.ahead = self._start_trace(after, at, config)
        if self.ahead is not None:              # the simulator, a problem with a signature
            seq = config_seed(self.seed, self.spec.tests.index(after), at)
            self.ahead.drawn = _Drawn(_Background(lambda: shared_config_inputs(after.problem, config, seq),
                                                  name="inputs"))

    def _launch_next(self) -> None:
        """Start executing the configuration traced ahead, once its own tracing and inputs are
        done, on a thread of its own: it runs while this configuration's output is compared and
        checked for downgrades (half a second of one core for a 224x224 batch, the other idle).
        It is taken at its turn, or killed and let go should it not run (this one fails, its
        test is skipped). Nothing of it is read before its turn: every verdict comes in order."""
        ahead = self.ahead
        if ahead is None or ahead.drawn is None or ahead.launched is not None or self.cancel_event.is_set():
            return
        test, index, config = ahead.test, ahead.key[1], ahead.config
        limits = self._config_limits(_signature_bytes(ahead.specs))
        job = self._inputs_job(test, index, config, len(ahead.specs))
        stop = _EitherSet(self.cancel_event, ahead.stop)

        def run() -> ConfigRun | None:
            shared, kwargs = ahead.drawn.result()
            traced = ahead.background.result()
            if stop.is_set():
                return None
            return run_configuration(dataclasses.replace(job, args=shared.arrays, kwargs=kwargs, shared_inputs=shared),
                                     limits, stop, traced=traced)
        ahead.launched, ahead.launched_limits = _Background(run, name="run-ahead"), limits

    def _let_go(self, test: TestSpec) -> None:
        """Kill and let go what was begun ahead for a configuration of `test`, which stopped
        (or never started): none of its configurations runs after this."""
        if self.ahead is not None and self.ahead.key[0] == test.name:
            self.ahead.discard()
            self.ahead = None

    def _timed(self, test: TestSpec, config: dict, label: str, run: ConfigRun, base: dict) -> dict:
        if run.latency_us is None:
            return dict(base, status=TestStatus.ERROR, message=f"{label}: no valid latency was measured")
        if self.backend == Backend.SIM:
            flops, _ = problems.work(test.problem, config)
            if run.matmul_flops < 0.99 * flops:
                # a run that skipped the work: its latency proves nothing
                self.flags.append(f"trace_inconsistent:{test.name}")
                return dict(base, status=TestStatus.ERROR,
                            message=f"{label}: the kernel executed {run.matmul_flops:.4g} of the {flops:.4g} "
                                    f"matmul FLOPs the problem needs, so its latency cannot count; course staff "
                                    f"will review this run")
            base["detail"]["instructions"] = run.instructions
            base["detail"]["dma_count"] = run.dma_count
        return dict(base, status=TestStatus.PASSED, message="ok", p99_us=run.latency_us, profile=run.profile)

    # ----- the whole run ----------------------------------------------------------------------
    def grade(self) -> Report:
        return_big_buffers()            # a grade's large buffers leave no resident copies behind
        start = time.monotonic()
        self.deadline = start + self.budget_s
        try:
            self.prechecks()
            if self.backend == Backend.SIM and not cost_generation(self.spec.platform).calibrated:
                # each platform is timed by its own generation's model; one no hardware of its
                # generation has checked yet (trn3) says so on every report
                self.flags.append(f"uncalibrated_model:{self.spec.platform}")
            untimed = [t for t in self.spec.tests if not t.timed]
            timed = [t for t in self.spec.tests if t.timed]
            self.order = untimed + timed
            # each reference answer is worked out beside the executor: one BLAS thread per thread
            # or process keeps them off each other's cores (two BLAS threads here made it 20% slower)
            with one_blas_thread():
                for batch in (untimed, timed):      # timed tests are gated on correctness
                    with ThreadPoolExecutor(max_workers=max(1, self.opt.jobs)) as pool:
                        for test, result in zip(batch, pool.map(self.run_test, batch)):
                            self.results[test.name] = result
        finally:
            if self.ahead is not None:          # begun for a configuration that did not run
                self.ahead.discard()
                self.ahead = None
            shutil.rmtree(self.base, ignore_errors=True)
        ordered = [self.results[t.name] for t in self.spec.tests]
        missing = [fs.filename for key, fs in self.spec.files.items() if key not in self.sub.files]
        hints = {self.spec.files[key].filename: {"found": found, "expected": self.spec.files[key].archive_path}
                 for key, found in self.sub.near_misses.items() if key not in self.sub.files}
        return Report(
            assignment=self.spec.assignment, title=self.spec.title, spec_version=self.spec.spec_version,
            thresholds_version=self.spec.thresholds_version, spec_hash=self.spec.spec_hash, backend=self.backend,
            submission_sha256=self.sub.sha256, score=scoring.total(self.spec, ordered),
            flags=flags_in_spec_order(self.flags, self.spec),
            tests=ordered, seed_kind="public" if self.opt.seed is not None else "secret",
            seed=self.seed, answer_set=self.answers.set_id if self.answers is not None else None,
            grader_version=GRADER_VERSION,
            graded_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            duration_s=round(time.monotonic() - start, 3), platform=self.spec.platform, dialect=self.spec.dialect,
            status=self.cancel.reason if self.cancel_event.is_set() else ReportStatus.COMPLETED,
            time_budget_s=self.budget_s, budget_note=self._budget_note(), missing_files=missing, missing_hints=hints,
            rejections=self.rejections, warnings=self.warnings, blas=_blas_text(), hardware=self._hardware_text(),
            problem_hashes=dict(self.spec.problem_hashes))

    def _hardware_text(self) -> str:
        """'current SDK line (nki 0.6.0), LNC=2 (Trn2's default), NeuronCore 3': what timed it."""
        if self.neuron is None:
            return ""
        cores = ", ".join(str(c) for c in self.cores)
        return (f"{self.neuron['line']} SDK line ({self.neuron['sdk']}), LNC={self.neuron['lnc']} "
                f"({self.neuron['lnc_source']}), NeuronCore{'s' if len(self.cores) > 1 else ''} {cores}")

    def _budget_note(self) -> str:
        """What the time budget did, for the report's header ("" when it did nothing)."""
        notes = []
        for (file, kernel), message in self.timeouts.items():
            repeated = [r.name for r in self.results.values()
                        if r.details.get("not_run") == "timed_out" and r.file == self.spec.files[file].filename]
            notes.append(f"{kernel} in {self.spec.files[file].filename} timed out"
                         + (f"; {len(repeated)} later tests of it failed at once" if repeated else ""))
        if self.budget_cut:
            notes.append(f"the {self.budget_s:g} s time budget ran out before {len(self.budget_cut)} tests")
        return "; ".join(notes)


@dataclass
class _Tracing:
    """A configuration's tracing child, running on a thread of its own."""
    key: tuple                          # (test name, configuration index)
    background: _Background
    stop: threading.Event
    limits: Limits
    specs: list                         # [(shape, dtype)] it traces for
    kwargs: dict
    seen_as: tuple = ()                 # everything tracing is given (Run.last_traced)
    drawn: _Drawn | None = None         # its inputs, when drawn while the configuration before ran
    test: TestSpec | None = None        # what `key` names
    config: dict | None = None
    # its run (a ConfigRun, or None when let go first), started while the configuration before
    # it was checked, and the limits it runs under
    launched: _Background | None = None
    launched_limits: Limits | None = None

    def discard(self) -> None:
        self.stop.set()                 # kills its tracing child, and its executor once started
        self.background.thread.join()
        if self.launched is not None:
            self.launched.thread.join()
        if self.drawn is not None:
            self.drawn.discard()


@dataclass
class _Drawn:
    """A configuration's inputs, drawn into shared memory on a thread of their own."""
    background: _Background             # (SharedInputs, kwargs)

    def result(self) -> tuple:
        return self.background.result()

    def discard(self) -> None:
        """Let the memory go once drawn (its descriptor would keep it for the process's life)."""
        try:
            shared, _ = self.background.result()
        except BaseException:           # a failed draw left nothing behind (sharedmem.draw)
            return
        shared.close()


def _signature_bytes(specs: list) -> int:
    """The bytes of the inputs a signature [(shape, dtype)] describes, before any is drawn."""
    return sum(math.prod(shape) * dtype.itemsize for shape, dtype in specs)


class _EitherSet:
    """Set when either event is (what run_child watches to kill a child: the grade's cancel, or
    one configuration's own stop)."""

    def __init__(self, *events: threading.Event) -> None:
        self.events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


class _Deferred:
    """A computation run only when its result is asked for (the Future interface grade uses)."""

    def __init__(self, compute: Callable[[], tuple]) -> None:
        self.compute = compute

    def result(self) -> tuple:
        return self.compute()


class _Ready:
    """A result there already (an answer made ahead)."""

    def __init__(self, value: tuple) -> None:
        self.value = value

    def result(self) -> tuple:
        return self.value


class _Background:
    """A computation started at once on a daemon thread: when the kernel fails and nobody asks
    for the answer, the grader's process need not wait for it to exit (a pool thread it must)."""

    def __init__(self, compute: Callable[[], tuple], name: str = "reference-answer") -> None:
        self.value: list = []
        self.thread = threading.Thread(target=self._run, args=(compute,), daemon=True, name=name)
        self.thread.start()

    def _run(self, compute) -> None:
        try:
            self.value.append((True, compute()))
        except BaseException as err:       # handed to whoever asks for the result
            self.value.append((False, err))

    def result(self) -> tuple:
        self.thread.join()
        ok, value = self.value[0]
        if not ok:
            raise value
        return value


def _config_label(config: dict) -> str:
    """A config as the student reads it, for a caller holding only a config (a grade names its
    test's problem: problems.label)."""
    return problems.problem_of_config(config).label(config)


def _job_root() -> str:
    """The directory every grade of this user keeps its job directories in; each child gets
    it covered by an empty tmpfs, so no child sees another grade's jobs, running or left
    behind by a crash. On /dev/shm when that is a tmpfs with room to spare (inputs and outputs
    of the large tests are 200 MB each, and a disk-backed /tmp writes them out)."""
    base = tempfile.gettempdir()
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize >= 4 * 2**30 and os.access("/dev/shm", os.W_OK):
            base = "/dev/shm"
    except OSError:
        pass
    root = os.path.join(base, f"nkigrader-{os.getuid()}")
    os.makedirs(root, mode=0o700, exist_ok=True)
    return root


def grade(submission: Submission, spec: AssignmentSpec, options: GradeOptions | None = None) -> Report:
    return _Run(submission, spec, options or GradeOptions()).grade()


class _CallableModule(type(sys)):
    """`grader.grade(...)` is the public grading call, but importing this module makes the
    package attribute `grader.grade` this module: calling the module grades."""

    def __call__(self, submission: Submission, spec: AssignmentSpec, options: GradeOptions | None = None) -> Report:
        return grade(submission, spec, options)


sys.modules[__name__].__class__ = _CallableModule


def flags_in_spec_order(flags: list[str], spec) -> list[str]:
    """Flags about the submission as a whole first, then each test's in the spec's order: with
    tests run in parallel (GradeOptions.jobs) they are raised in the order tests finish, and the
    same grade must read the same whichever test finished first."""
    position = {t.name: i for i, t in enumerate(spec.tests)}
    return sorted(flags, key=lambda flag: position.get(flag.partition(":")[2], -1))

