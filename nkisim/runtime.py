"""Running a kernel in two halves, as neuronx-cc and the device do: tracing runs the kernel's
Python on value-free tensors into a program (nkisim.program), and execution runs that
program on the real inputs with NumPy (nkisim.execute). A graded run does the two in
different processes; local use (nki.baremetal, nki.benchmark) does both here."""
from __future__ import annotations

import inspect
import sys
import copy
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from . import collector, dtypes
from . import instructions  # noqa: F401 (the table, and what tile operators trace)
from .errors import ArgumentError, KernelContractError
from .execute import execute
from .launch import Grid, Launch, parse_grid
from .machine import Machine
from .running import RUNNING
from .memory import Buffer
from .program import Program, output_regions
from .settings import SimSettings
from .source import SourceSite
from .tensor import DeviceTensor
from .trace import Region


@dataclass
class KernelRun:
    """Everything one simulated run produced: the traced program and what executing it gave."""

    outputs: object                       # NumPy array, or tuple/list/dict of them
    program: Program
    trace: list                           # the executed instructions the cost model times
    printed: list[str] = field(default_factory=list)
    compile_options: dict = field(default_factory=dict)
    settings: SimSettings = field(default_factory=SimSettings)
    peak_sbuf_bytes: int = 0
    peak_psum_banks: int = 0
    machine: Machine | None = None       # the tracing machine (allocation accounting)


class Kernel:
    """What @nki.jit returns. Called with NumPy arrays outside a kernel it runs like
    nki.baremetal; called from inside a running kernel it is an ordinary helper call."""

    dialect = "neuronxcc-nki"      # its dialect's name in nkisim.dialects (the legacy front end's)
    lnc = 1                        # physical cores of the logical NeuronCore it is launched on
    grid: Grid | None = None       # the SPMD launch grid of kernel[grid] (the legacy dialect's)

    def __init__(self, func, mode: str = "auto", **options) -> None:
        self.func = func
        self.mode = mode
        self.options = options
        self.skip_middle_end = False
        self.__name__ = getattr(func, "__name__", "kernel")
        self.__qualname__ = getattr(func, "__qualname__", self.__name__)
        self.__doc__ = getattr(func, "__doc__", None)
        self.__module__ = getattr(func, "__module__", None)
        self.__wrapped__ = func

    def __call__(self, *args, **kwargs):
        if RUNNING.get() is not None:
            return self.func(*args, **kwargs)
        return run_kernel(self, args, kwargs).outputs

    # the dialect's kernel-level rules (nkisim.nki06.jit's kernels have the current dialect's)
    def before_trace(self, args, kwargs) -> None:
        """Checks of the kernel and its arguments before its Python runs."""

    def check_result(self, result, site) -> None:
        """Checks of what the traced kernel returned (its HBM outputs are checked for both)."""

    def after_trace(self, machine) -> None:
        """What the dialect adds to a finished trace (NKI 0.6: with_schedule's edges)."""

    def __getitem__(self, grid):
        """kernel[grid](...): one instance of the kernel per grid point (nkisim.launch)."""
        if RUNNING.get() is not None:
            raise KernelContractError(f"'{self.__name__}[...]' is launched with an SPMD grid from inside a kernel; "
                                      "only the top-level launch takes a grid",
                                      remedy=f"call {self.__name__}(...) as a helper, without the grid",
                                      code="err_nested_kernel_with_spmd_grid")
        if self.grid is not None:
            raise KernelContractError(f"'{self.__name__}' already has the launch grid {self.grid.sizes}",
                                      remedy="give the whole grid in one subscript: kernel[2, 3](...)",
                                      code="err_unsupported_args")
        launched = copy.copy(self)
        launched.grid = parse_grid(grid)
        launched.lnc = launched.grid.cores
        return launched

    def __repr__(self) -> str:
        return f"<nki kernel {self.__name__}>"


def as_kernel(kernel) -> Kernel:
    if isinstance(kernel, Kernel):
        return kernel
    if callable(kernel):
        return Kernel(kernel)
    raise KernelContractError(f"expected a kernel function, got {type(kernel).__name__}")


def _to_device(machine: Machine, name: str, value, index: list[int], mutable: list | None = None):
    """A kernel argument: NumPy arrays (or stand-ins with .shape and .dtype) become read-only
    HBM tensors without values, or, for a parameter annotated nt.mutable_tensor (`mutable`, the
    list its tensors go into), HBM tensors the kernel may write, holding the argument's values;
    anything else is passed through."""
    if isinstance(value, (np.ndarray, ArgSpec)):
        try:
            dtype = dtypes.to_dtype(value.dtype)
        except Exception:
            raise KernelContractError(f"kernel argument '{name}' has unsupported dtype {value.dtype}",
                                      remedy="pass float32, float16, bfloat16 or integer arrays") from None
        t = machine.allocate(tuple(int(n) for n in value.shape), dtype, Buffer.HBM, name=name,
                             is_input=mutable is None, input_index=index[0], site=None)
        if mutable is not None:
            t._alloc.written = True              # it starts with the argument's values
            mutable.append(t)
        index[0] += 1
        return t
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (np.ndarray, ArgSpec)) for v in value):
        return type(value)(_to_device(machine, f"{name}[{i}]", v, index, mutable) for i, v in enumerate(value))
    return value


def _is_mutable(annotation) -> bool:
    """A parameter annotated nt.mutable_tensor (nkisim.nki.typing), or with its name as a string."""
    if isinstance(annotation, str):
        return annotation.split("[")[0].split(".")[-1].strip() == "mutable_tensor"
    return getattr(annotation, "_name", None) == "mutable_tensor" and type(annotation).__module__.startswith("nkisim")


def _mutable_params(func) -> set[str]:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return set()
    return {p.name for p in params if p.annotation is not p.empty and _is_mutable(p.annotation)}


def _check_mutable_returned(outputs, mutable: list, kernel: str, site) -> None:
    """err_mutable_parameter_not_returned: each nt.mutable_tensor parameter is among the outputs."""
    returned = {r.alloc_id for r in output_regions(outputs)}
    for t in mutable:
        name = t.name
        if t._alloc.id not in returned:
            raise KernelContractError(f"'{kernel}' annotates parameter '{name}' as nt.mutable_tensor but does not "
                                      "return it", remedy=f"return {name} (with the other outputs)",
                                      code="err_mutable_parameter_not_returned", site=site)


@dataclass(frozen=True)
class ArgSpec:
    """What tracing needs of an input array: its shape and dtype, never its values."""

    shape: tuple
    dtype: object

    @classmethod
    def of(cls, value):
        if isinstance(value, np.ndarray):
            return cls(tuple(value.shape), value.dtype)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
            return type(value)(cls.of(v) for v in value)
        return value


def flat_arrays(args, kwargs) -> list[np.ndarray]:
    """The input arrays in the order tracing numbered them (positional, then keyword)."""
    found = []
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, np.ndarray):
            found.append(value)
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
            found.extend(value)
    return found


def _param_names(func, n: int) -> list[str]:
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}" for i in range(n)]


def _output_regions(value, where: str, site=None):
    """The structure of HBM regions the kernel returned (the program's outputs). Errors point at
    `site`, the kernel's last line (its return), never at the grader that called it."""
    if isinstance(value, DeviceTensor):
        if not value.buffer.is_hbm:
            raise KernelContractError(
                f"the kernel returned {value._label()}; kernel outputs must be HBM tensors",
                remedy="allocate the output with nl.ndarray(shape, dtype, buffer=nl.hbm), copy the "
                       "result into it with nisa.dma_copy, and return that", site=site)
        if value._alloc.is_input:
            raise KernelContractError(
                f"the kernel returned its own input {value._label()}",
                remedy="return a new HBM tensor the kernel allocated and wrote", site=site)
        if not value._alloc.written:
            raise KernelContractError(
                f"the kernel's output {value._label()} was never written",
                remedy="write the output tensor with nisa.dma_copy before returning it",
                code="err_tensor_output_not_written_to", site=site)
        return value.region()
    if isinstance(value, (tuple, list)):
        return type(value)(_output_regions(v, where, site) for v in value)
    if isinstance(value, dict):
        return {str(k): _output_regions(v, where, site) for k, v in value.items()}
    if value is None:
        raise KernelContractError(f"the kernel {where} returned nothing",
                                  remedy="end the kernel with `return` of the output HBM tensor",
                                  site=site)
    raise KernelContractError(f"the kernel returned a {type(value).__name__}; expected HBM tensors", site=site)


def _same_outputs(a, b) -> bool:
    """Do two cores' returned output structures name the same regions?"""
    if isinstance(a, Region) and isinstance(b, Region):
        return (a.alloc_id, a.start, a.shape, a.strides) == (b.alloc_id, b.start, b.shape, b.strides)
    if isinstance(a, (tuple, list)) and type(a) is type(b) and len(a) == len(b):
        return all(_same_outputs(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return all(_same_outputs(a[k], b[k]) for k in a)
    return False


def _call_keeping_locals(func, args, kwargs):
    """Call the kernel and also return its frame, which keeps the kernel's locals alive after
    it returns (a one-event profile hook grabs it), so on-chip capacity can be checked on the
    tiles the kernel still referenced at its end, not only when a later allocation is made."""
    if sys.getprofile() is not None:    # a profiler is running: do not interfere with it
        return func(*args, **kwargs), None
    captured = []

    def hook(frame, event, arg):
        if event == "call" and not captured:    # the kernel's own frame: the first call
            captured.append(frame)
            sys.setprofile(None)

    sys.setprofile(hook)
    try:
        result = func(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return result, (captured[0] if captured else None)


def _last_line(func) -> SourceSite | None:
    """Where a kernel ends (a missing `return` is reported there, not in our code)."""
    code = getattr(func, "__code__", None)
    if code is None:
        return None
    lines = [line for _, _, line in code.co_lines() if line is not None]
    return SourceSite(code.co_filename, max(lines) if lines else code.co_firstlineno)


def _check_cores(k: Kernel, machine: Machine) -> None:
    """A grid's nl.nc dimension places instances on the platform's physical cores (Trainium2: 2)."""
    most = 2 if getattr(machine.settings, "platform", "trn2") == "trn2" else 1
    if k.grid is not None and k.grid.cores > most:
        raise KernelContractError(f"the launch grid of '{k.__name__}' places instances on nl.nc({k.grid.cores}) "
                                  f"physical cores; a logical NeuronCore of this platform has {most}",
                                  remedy=f"use nl.nc({most})" if most > 1 else "launch without nl.nc on this platform",
                                  code="err_multi_cores_spmd_not_supported")


def trace_kernel(kernel, args, kwargs, settings: SimSettings | None = None,
                 compile_options: dict | None = None, lnc: int | None = None) -> tuple[Program, Machine]:
    """Run the kernel's Python on value-free tensors and return the program it traced.
    `args` may be NumPy arrays or ArgSpecs: only shapes and dtypes are used. `lnc`: the logical
    NeuronCore's physical cores, whatever the kernel object says (a grader launches at its
    spec's); None: the kernel's own launch (kernel[lnc])."""
    k = as_kernel(kernel)
    if lnc is not None and (lnc != k.lnc or k.grid is not None):     # the caller's launch, not the kernel's
        k = copy.copy(k)
        k.lnc, k.grid = lnc, None
    k.before_trace(args, kwargs)
    machine = Machine(settings)
    machine.dialect = k.dialect
    machine.cores = k.lnc
    machine.force_auto_alloc = getattr(k, "force_auto_alloc", False)    # @nki.compiler.force_auto_alloc
    _check_cores(k, machine)
    by_core = k.grid.instances_by_core() if k.grid is not None else [[()] for _ in range(k.lnc)]
    machine.instances = sum(map(len, by_core))
    machine.grid = k.grid
    machine.grid_sizes = k.grid.sizes if k.grid is not None else ()
    names = _param_names(k.func, len(args))
    with machine.activate(), collector.paused():
        counter, mutable_names, mutable = [0], _mutable_params(k.func), []
        dev_args = [_to_device(machine, n, a, counter, mutable if n in mutable_names else None)
                    for n, a in zip(names, args)]
        dev_kwargs = {n: _to_device(machine, n, v, counter, mutable if n in mutable_names else None)
                      for n, v in kwargs.items()}

        def run_instance(ids: tuple):
            machine.begin_instance(ids)
            result, frame = _call_keeping_locals(k.func, dev_args, dev_kwargs)
            try:
                machine.memory.check()   # what the kernel still held when it returned was live too
            finally:
                if frame is not None:
                    frame.clear()
                del frame
            machine.end_instance()
            return ids, result

        def run_core(core: int):
            return [run_instance(ids) for ids in by_core[core]]

        if k.lnc == 1:
            results = [run_core(0)]
        else:                             # each physical core of the logical one runs the kernel
            machine.launch = Launch(machine, k.lnc)
            results = machine.launch.run(run_core)
        outputs = None
        for core, instances in enumerate(results):
            for ids, result in instances:
                k.check_result(result, _last_line(k.func))
                returned = _output_regions(result, k.__name__, _last_line(k.func))
                if outputs is not None and not _same_outputs(returned, outputs):
                    who = f"SPMD instance {list(ids)}" if k.grid is not None else f"under LNC={k.lnc} core {core}"
                    raise KernelContractError(
                        f"{who} returned other tensors than the first instance: every instance returns the same "
                        "nl.shared_hbm outputs", remedy="allocate the outputs with buffer=nl.shared_hbm and return "
                                                        "the same tensors from every instance",
                        code="err_lnc_control_flow", site=_last_line(k.func))
                outputs = returned
        _check_mutable_returned(outputs, mutable, k.__name__, _last_line(k.func))
        k.after_trace(machine)
        # the allocation table (one tuple per allocation) is made while the collector is still paused
        program = Program(kernel=k.__name__, allocs=machine.allocation_table(), records=machine.trace,
                          outputs=outputs, compile_options=dict(compile_options or {}),
                          platform=getattr(machine.settings, "platform", "trn2"), dialect=k.dialect,
                          lnc=k.lnc, mutable_inputs=tuple(t._alloc.input_index for t in mutable))
    return program, machine


def run_kernel(kernel, args, kwargs, settings: SimSettings | None = None,
               compile_options: dict | None = None) -> KernelRun:
    """Trace `kernel`, then execute its program on the inputs: both halves of a graded run,
    in one process, with the same errors at the same kernel lines."""
    if settings is None:
        target = getattr(kernel, "options", {}).get("platform_target")      # @nki.jit(platform_target=...)
        settings = SimSettings(platform=PLATFORM_TARGETS[target]) if target is not None else SimSettings()
    program, machine = trace_kernel(kernel, args, kwargs, settings, compile_options)
    # inf/NaN from instruction math is a value, as on the engines, not a host warning.
    # Tiles are small: one BLAS thread multiplies them faster than several (measured 3x on
    # 128x128x444 matmuls) and never spins against other work on the machine.
    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
        done = execute(program, flat_arrays(args, kwargs), fill_nan=settings.fill_uninitialized_with_nan,
                       echo=True)
    return KernelRun(done.outputs, program, done.trace, done.printed, dict(compile_options or {}), settings,
                     machine.memory.peak_sbuf_bytes, machine.memory.peak_psum_banks, machine)


# ----- the nki entry points ------------------------------------------------------------------------

# the keywords each SDK 2.26 entry point documents (nki.baremetal, nki.benchmark, nki.jit pages)
BAREMETAL_OPTIONS = ("save_neff_name", "save_trace_name", "additional_compile_opt", "artifacts_dir")
# (and nkisim's own `settings=`, a SimSettings for the run: the platform, the latency noise)
BENCHMARK_OPTIONS = ("warmup", "iters", "save_neff_name", "save_trace_name", "additional_compile_opt", "settings")
# nki.jit's modes, and the keywords each passes on (simulation's platform_target: the doc tests')
JIT_OPTIONS = {"auto": BAREMETAL_OPTIONS + ("warmup", "iters", "platform_target"), "baremetal": BAREMETAL_OPTIONS,
               "benchmark": BENCHMARK_OPTIONS[:-1], "simulation": ("platform_target",), "jax": (), "torchxla": ()}
PLATFORM_TARGETS = {"trn1": "trn1", "inf2": "trn1", "trn2": "trn2"}


def _documented(kwargs: dict, allowed: tuple, where: str) -> None:
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ArgumentError(f"{where} does not take {', '.join(unknown)}: its keywords are "
                            f"{', '.join(allowed) if allowed else 'none'}",
                            remedy=f"call {where} with the documented keywords only", code="err_unsupported_args")
    target = kwargs.get("platform_target")
    if target is not None and target not in PLATFORM_TARGETS:
        raise ArgumentError(f"{where}(platform_target={target!r}): nkisim models {', '.join(PLATFORM_TARGETS)}",
                            remedy="pass platform_target='trn2' (or 'trn1')", code="err_unsupported_args")


def jit(func=None, mode: str = "auto", **kwargs):
    if mode not in JIT_OPTIONS:
        raise ArgumentError(f"nki.jit(mode={mode!r}): the modes are {', '.join(JIT_OPTIONS)}",
                            remedy="leave mode unset ('auto')", code="err_unsupported_args")
    _documented(kwargs, JIT_OPTIONS[mode], f"nki.jit(mode={mode!r})")

    def make(f):
        if isinstance(f, Kernel):   # decorators stacked in either order
            f.mode, f.options = mode, {**f.options, **kwargs}
            return f
        return Kernel(f, mode, **kwargs)
    return make if func is None else make(func)


def _decorator_or_call(kernel, make):
    if kernel is None:
        return make
    return make(kernel)


class BaremetalKernel:
    """What nki.baremetal returns: call it (or `[grid]` it, then call) on NumPy arrays."""

    def __init__(self, kernel: Kernel, compile_options: dict) -> None:
        self.kernel = kernel
        self.compile_options = compile_options
        self.__name__ = kernel.__name__

    def __call__(self, *args, **kwargs):
        return run_kernel(self.kernel, args, kwargs, compile_options=self.compile_options).outputs

    def __getitem__(self, grid):
        return BaremetalKernel(self.kernel[grid], self.compile_options)


def baremetal(kernel=None, **kwargs):
    """Compile-and-run on the (simulated) device; returns NumPy outputs. The file-naming keywords
    are accepted and name files only a device run writes."""
    _documented(kwargs, BAREMETAL_OPTIONS, "nki.baremetal")
    return _decorator_or_call(kernel, lambda k: BaremetalKernel(as_kernel(k), kwargs))


def simulate_kernel(kernel, *args, **kwargs):
    return run_kernel(kernel, args, kwargs).outputs


class LatencyPercentiles:
    """benchmark_result.nc_latency: percentiles of the estimated NeuronCore latency (us) over
    the benchmark's iterations, from the Trn2 cost model (nkisim.cost)."""

    def __init__(self, run: KernelRun, iters: int) -> None:
        from . import cost
        settings = run.settings
        self.timeline = cost.estimate(run)
        self.samples_us = cost.latency_samples_us(self.timeline, iters, settings.latency_noise,
                                                  settings.noise_seed)

    def get_latency_percentile(self, percentile) -> float:
        if not 0 <= percentile <= 100:
            raise ValueError(f"percentile must be between 0 and 100, got {percentile}")
        return float(np.percentile(self.samples_us, percentile))


class BenchmarkResult:
    def __init__(self, run: KernelRun, iters: int) -> None:
        self.run = run
        self.nc_latency = LatencyPercentiles(run, iters)


class BenchmarkedKernel:
    """What nki.benchmark returns: call it like the kernel, then read .benchmark_result."""

    def __init__(self, kernel, warmup: int = 10, iters: int = 100, settings: SimSettings | None = None,
                 **options) -> None:
        self.kernel = as_kernel(kernel)
        self.warmup = warmup
        self.iters = iters
        self.settings = settings
        self.options = options
        self.benchmark_result: BenchmarkResult | None = None

    def __call__(self, *args, **kwargs):
        return self._run(self.kernel, args, kwargs)

    def __getitem__(self, grid):
        """benchmarked[grid](...): the kernel launched on `grid`; the result lands on this object."""
        launched = self.kernel[grid]
        return lambda *args, **kwargs: self._run(launched, args, kwargs)

    def _run(self, kernel: Kernel, args, kwargs):
        # one simulated execution stands for warmup + iters: the model is deterministic
        run = run_kernel(kernel, args, kwargs, settings=self.settings, compile_options=self.options)
        self.benchmark_result = BenchmarkResult(run, self.iters)
        return run.outputs


def benchmark(kernel=None, **kwargs):
    _documented(kwargs, BENCHMARK_OPTIONS, "nki.benchmark")
    for name in ("warmup", "iters"):
        value = kwargs.get(name, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "warmup" else 1):
            raise ArgumentError(f"nki.benchmark's {name} must be {'a non-negative' if name == 'warmup' else 'a positive'} "
                                f"int, got {value!r}", code="err_unsupported_args")
    return _decorator_or_call(kernel, lambda k: BenchmarkedKernel(k, **kwargs))
