"""`nki.jit` and `nki.simulate` of NKI 0.6: a kernel is compiled (here: traced) and run on NumPy
arrays; the platform comes from NEURON_PLATFORM_TARGET_OVERRIDE, never from an argument."""
from __future__ import annotations

import copy
import os

from ..dialects import CURRENT
from ..errors import ArgumentError, KernelContractError, NotSimulatedError
from ..running import RUNNING
from ..runtime import Kernel, run_kernel
from ..settings import SimSettings
from . import rules
from .bind import add_edges
from .loops import check_loops_ended

# NEURON_PLATFORM_TARGET_OVERRIDE's documented values -> nkisim's platform names
PLATFORM_TARGETS = {"trn1": "trn1", "inf2": "trn1", "gen2": "trn1", "trn2": "trn2", "gen3": "trn2",
                    "trn3": "trn3", "gen4": "trn3"}


class CurrentKernel(Kernel):
    """What NKI 0.6's @nki.jit returns: call it on NumPy arrays (or `kernel[lnc](...)`)."""

    dialect = CURRENT.name

    def __init__(self, func, **options) -> None:
        super().__init__(func, "auto", **options)

    def __call__(self, *args, **kwargs):
        if RUNNING.get() is not None:
            raise KernelContractError(
                f"'{self.__name__}' is decorated with @nki.jit and called from inside another kernel; "
                "since NKI 0.3 only the top-level kernel carries @nki.jit",
                remedy=f"remove @nki.jit from '{self.__name__}': helpers are plain functions",
                code="err_decorated_helper")
        rules.arrays_only(args)
        return run_kernel(self, args, kwargs, settings=settings_from_environment()).outputs

    def __getitem__(self, lnc):
        """kernel[lnc](...): launch on a logical NeuronCore of `lnc` physical cores, each running
        the kernel with its own nl.program_id(0) (Trn2 pairs two)."""
        if type(lnc) is not int or lnc < 1:
            raise ArgumentError(f"kernel[{lnc!r}]: the launch takes the logical NeuronCore's size, a single int",
                                remedy="launch as kernel[1](...) or kernel[2](...)", code="err_unsupported_args")
        # LNC=2 pairs two cores from Trainium2 on (logical-neuroncore-config, trainium3.rst); trn1 has only LNC=1
        most = 1 if settings_from_environment().platform == "trn1" else 2
        if lnc > most:
            raise ArgumentError(f"kernel[{lnc}]: a logical NeuronCore of this platform has at most {most} physical "
                                f"core{'s' if most > 1 else ''}", remedy=f"launch as kernel[{most}](...)",
                                code="err_unsupported_lnc")
        if lnc == self.lnc:
            return self
        launched = copy.copy(self)
        launched.lnc = lnc
        return launched

    def before_trace(self, args, kwargs) -> None:
        """What the NKI compiler refuses when it compiles the kernel (its first call), not when
        the file is imported."""
        rules.check_kernel_function(self.func)
        rules.check_arguments(args, kwargs, self.__name__)

    def check_result(self, result, site) -> None:
        rules.check_outputs(result, self.__name__, site)

    schedule: tuple = ()

    def with_schedule(self, edges):
        """The kernel with scheduling edges between named instructions: [(consumer, producer or
        [producers]), ...], each name an instruction's `name=`; "consumer after producer"."""
        checked = []
        for edge in edges:
            if not (isinstance(edge, tuple) and len(edge) == 2 and isinstance(edge[0], str)):
                raise ArgumentError(f"with_schedule takes (consumer, producer) pairs of instruction names, got {edge!r}",
                                    code="err_unsupported_args")
            producers = (edge[1],) if isinstance(edge[1], str) else tuple(edge[1])
            if not producers or not all(isinstance(p, str) for p in producers):
                raise ArgumentError(f"the producers of with_schedule's edge {edge!r} are instruction names",
                                    code="err_unsupported_args")
            checked.append((edge[0], producers))
        scheduled = copy.copy(self)
        scheduled.schedule = self.schedule + tuple(checked)
        return scheduled

    def after_trace(self, machine) -> None:
        check_loops_ended(machine)
        if not self.schedule:
            return
        named: dict[str, list] = {}
        for rec in machine.trace:
            if "name" in rec.attrs:
                named.setdefault(rec.attrs["name"], []).append(rec)
        for consumer, producers in self.schedule:
            for name in (consumer,) + producers:
                if name not in named:
                    raise KernelContractError(f"with_schedule names {name!r}, which no instruction of "
                                              f"'{self.__name__}' was given as name=",
                                              remedy=f"pass name={name!r} to the instruction it means",
                                              code="err_schedule_unknown_name")
            earlier = [rec for p in producers for rec in named[p]]
            if min(rec.index for rec in named[consumer]) < min(rec.index for rec in earlier):
                raise NotSimulatedError(
                    f"with_schedule puts {consumer!r} after {', '.join(map(repr, producers))}, which the kernel calls "
                    "later: nkisim keeps each engine's program order, so an edge against it cannot be scheduled",
                    remedy="call the producer before the consumer in the kernel", code="err_not_simulated")
            add_edges(named[consumer], earlier)


def jit(func=None, **options):
    """@nki.jit or @nki.jit(...): NKI 0.6 takes the platform from the environment."""
    if "platform_target" in options:
        raise ArgumentError(
            "nki.jit(platform_target=...) is an error since NKI 0.3: the target comes from the "
            "environment", remedy="set NEURON_PLATFORM_TARGET_OVERRIDE=trn2 (or trn1, trn3) instead",
            code="err_unsupported_args")
    if options:
        raise ArgumentError(f"nki.jit does not take {', '.join(sorted(options))}",
                            remedy="decorate with @nki.jit alone", code="err_unsupported_args")

    def make(f):
        if isinstance(f, Kernel):
            raise KernelContractError(f"'{f.__name__}' is decorated with @nki.jit twice",
                                      remedy="keep one @nki.jit")
        return CurrentKernel(f)
    return make if func is None else make(func)


def simulate(kernel):
    """nki.simulate(kernel)(*arrays): run the kernel on NumPy arrays, return NumPy outputs."""
    if not isinstance(kernel, CurrentKernel):
        if isinstance(kernel, Kernel):
            raise KernelContractError("nki.simulate takes an NKI 0.6 kernel; this one was decorated with "
                                      "the legacy neuronxcc.nki.jit", remedy="decorate it with @nki.jit "
                                                                             "(import nki)")
        kernel = jit(kernel)
    return kernel             # nkisim simulates every kernel it runs: calling it runs it here


def settings_from_environment() -> SimSettings:
    """The run's settings from the documented variables: NEURON_PLATFORM_TARGET_OVERRIDE names the
    platform; NKI_PRECISE_FP=1 (the default since 0.4) stores every dtype at its own precision,
    which is what nkisim always does."""
    precise = os.environ.get("NKI_PRECISE_FP", "1")
    if precise != "1":
        raise NotSimulatedError(
            f"NKI_PRECISE_FP={precise!r}: nkisim stores every dtype at its own precision, as Trainium does "
            "(NKI_PRECISE_FP=1, the default since NKI 0.4)", remedy="unset NKI_PRECISE_FP or set it to 1",
            code="err_not_simulated")
    target = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE")
    if target is None or target == "":
        return SimSettings()
    platform = PLATFORM_TARGETS.get(target)
    if platform is None:
        raise ArgumentError(f"NEURON_PLATFORM_TARGET_OVERRIDE={target!r} is not a Neuron platform",
                            remedy=f"use one of {', '.join(PLATFORM_TARGETS)}", code="err_unsupported_args")
    return SimSettings(platform=platform)
