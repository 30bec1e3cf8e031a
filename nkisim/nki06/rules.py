"""The kernel-level rules NKI 0.3+ added, checked before and after tracing a current-dialect
kernel: what the NKI compiler refuses that Python itself would run.

Each error names the rule, as the migration guide states it, and how to write the kernel
instead. Instruction-level rules (PSUM-source DMA, named enums, dst-first calls) live with
the instructions (nkisim.nki06.isa)."""
from __future__ import annotations

import dis
import types

from ..dialects import LEGACY, api_module_of, dialect_of_module
from ..errors import KernelContractError
from ..memory import Buffer
from ..source import SourceSite
from ..tensor import DeviceTensor

def check_kernel_function(func) -> None:
    """Refuse what the NKI compiler refuses in the kernel's source, before any of it runs."""
    code = getattr(func, "__code__", None)
    if code is None:
        return
    if code.co_kwonlyargcount:
        raise KernelContractError(
            f"kernel '{func.__name__}' has keyword-only parameters (a '*' separator); since NKI 0.3 a "
            "kernel's parameters are positional or keyword", site=SourceSite(code.co_filename, code.co_firstlineno),
            remedy="drop the '*' from the kernel's parameter list", code="err_unsupported_syntax")
    reached = _functions_reached(func)
    for f in reached:
        _refuse_identity_tests(f)
    _refuse_legacy_namespace(reached)


def _functions_reached(func) -> list:
    """The kernel and the plain functions of its own module it names (helpers, transitively):
    what the NKI compiler compiles along with it."""
    seen, order, todo = set(), [], [func]
    while todo:
        f = todo.pop()
        code = getattr(f, "__code__", None)
        if code is None or id(code) in seen:
            continue
        seen.add(id(code))
        order.append(f)
        module_globals = getattr(f, "__globals__", {})
        for name in _names_used(code):
            value = module_globals.get(name)
            target = getattr(value, "func", value)          # a Kernel's own function
            if isinstance(target, types.FunctionType) and target.__globals__ is module_globals:
                todo.append(target)
    return order


def _names_used(code) -> set[str]:
    """The global (and attribute) names a function's code and its nested code name."""
    return set().union(*(c.co_names for c in _codes(code)))


def _codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _refuse_identity_tests(func) -> None:
    for code in _codes(func.__code__):
        for ins in dis.get_instructions(code):
            # `a is b` is IS_OP; CPython compiles `x is None` / `x is not None` in a condition to
            # a jump on None instead
            if ins.opname == "IS_OP" or ins.opname.endswith(("_IF_NONE", "_IF_NOT_NONE")):
                line = ins.positions.lineno if ins.positions and ins.positions.lineno else code.co_firstlineno
                spelled = ("is not" if ins.arg else "is") if ins.opname == "IS_OP" else "is / is not"
                raise KernelContractError(
                    f"'{spelled}' in NKI code ({func.__name__}): since NKI 0.3 the NKI compiler does not "
                    "support identity comparisons", site=SourceSite(code.co_filename, line),
                    remedy="compare with == / != (for None: test the value itself, e.g. `if bias:` "
                           "or a separate flag)", code="err_unsupported_syntax")


def _refuse_legacy_namespace(functions: list) -> None:
    """A current-dialect kernel (or a helper it calls: `functions`, the kernel first) may not use
    the legacy neuronxcc.nki namespace: since NKI 0.4 that is a compilation error."""
    module_globals = getattr(functions[0], "__globals__", {})
    for reached in functions:
        for name in sorted(_names_used(reached.__code__)):
            value = module_globals.get(name)
            if not _is_legacy(value):
                continue
            code = reached.__code__
            raise KernelContractError(
                f"'{reached.__name__}' is compiled as NKI 0.6 (an nki.jit kernel), but it uses the legacy "
                f"neuronxcc.nki namespace (as '{name}'): since NKI 0.4 (Neuron SDK 2.30) using "
                "neuronxcc.nki inside an NKI kernel is a compilation error",
                site=SourceSite(code.co_filename, code.co_firstlineno),
                remedy="import nki, nki.language as nl and nki.isa as nisa only, and migrate the legacy "
                       "calls (every nki.isa call takes dst first)", code="err_mixed_nki_namespaces")


def _is_legacy(value) -> bool:
    if isinstance(value, types.ModuleType):
        module = value.__name__
    elif callable(value):
        module = getattr(value, "__module__", None)
    else:
        return False
    return isinstance(module, str) and dialect_of_module(api_module_of(module) or module) is LEGACY


def check_arguments(args, kwargs, kernel_name: str) -> None:
    """Kernel arguments are a cache key since NKI 0.3: tuples, never lists."""
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, list):
            raise KernelContractError(
                f"kernel '{kernel_name}' was called with a list argument; since NKI 0.3 kernel arguments "
                "must be hashable: pass a tuple", remedy="pass tuple(...) instead of the list",
                code="err_unsupported_args")


def check_outputs(result, kernel_name: str, site) -> None:
    """Since NKI 0.3 a kernel returns tensors in nl.shared_hbm."""
    for t in _tensors(result):
        if t._alloc.buffer is not Buffer.SHARED_HBM and not t._alloc.is_input:
            raise KernelContractError(
                f"kernel '{kernel_name}' returns {t._label()}; since NKI 0.3 returned "
                "tensors must be allocated in nl.shared_hbm", site=site,
                remedy="allocate the output with nl.ndarray(shape, dtype, buffer=nl.shared_hbm)",
                code="err_output_tensor_not_shared_hbm")


def _tensors(value):
    if isinstance(value, DeviceTensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def arrays_only(args) -> None:
    """nki.simulate and a jit kernel run here on NumPy arrays (the framework NKI detects)."""
    for value in args:
        if type(value).__module__.split(".")[0] in ("torch", "jax", "jaxlib"):
            raise KernelContractError(
                f"nkisim runs kernels on NumPy arrays, got a {type(value).__module__}.{type(value).__name__}",
                remedy="pass NumPy arrays (tensor.numpy())", code="err_unsupported_args")
    return None

