"""`neuronxcc.nki.compiler`: compiler directives and the direct allocation API, with SDK 2.26's
signatures (an undocumented keyword is an ArgumentError). No directive changes what a kernel
computes; each marks the kernel. `ncc.sbuf` / `ncc.psum` place SBUF / PSUM tiles directly
(nkisim.direct_alloc: the places, their rules, and tiles that share physical bytes)."""
import numbers
import sys

from .. import direct_alloc
from ..errors import ArgumentError, KernelContractError
from ..facade import api_view, make_getattr, no_such_name
from ..memory import Buffer
from ..registry import kernel_facing
from ..runtime import Kernel, as_kernel


def _decorate(func, mark):
    """`@directive` and `@directive(...)` alike: mark the kernel (made one if need be)."""
    def apply(f):
        kernel = f if isinstance(f, Kernel) else as_kernel(f)
        mark(kernel)
        return kernel
    return apply if func is None else apply(func)


def skip_middle_end_transformations(func=None):
    """Skip the middle end (no loop fusion, no pipelining). The cost model reads this flag."""
    def mark(kernel):
        kernel.skip_middle_end = True
    return _decorate(func, mark)


def enable_stack_allocator(func=None, log_level=50):
    """Allocate the kernel's SBUF and PSUM tensors with the stack allocator. The 2.26 reference:
    "Must use together with skip_middle_end_transformations", checked when the kernel is traced
    (so the two decorators may come in either order). nkisim's allocation is the same either way."""
    if isinstance(log_level, bool) or not isinstance(log_level, numbers.Integral) or log_level < 0:
        raise ArgumentError(f"log_level of nki.compiler.enable_stack_allocator must be a non-negative int "
                            f"(a logging level), got {log_level!r}", remedy="leave it unset (50) or pass e.g. 10")

    def mark(kernel):
        kernel.stack_allocator_log_level = int(log_level)
        if getattr(kernel, "_stack_allocator_checked", False):
            return
        kernel._stack_allocator_checked = True
        checks = kernel.before_trace

        def before_trace(args, kwargs):
            if not kernel.skip_middle_end:
                raise KernelContractError(
                    f"'{kernel.__name__}' is decorated with @nki.compiler.enable_stack_allocator without "
                    "@nki.compiler.skip_middle_end_transformations: the two must be used together",
                    remedy="add @nki.compiler.skip_middle_end_transformations, or drop enable_stack_allocator",
                    code="err_unsupported_args")
            checks(args, kwargs)
        kernel.before_trace = before_trace
    return _decorate(func, mark)


def force_auto_alloc(func=None):
    """Turn automatic allocation on, ignoring direct allocations in the kernel: its ncc.sbuf/psum
    alloc and mod_alloc tensors are allocated as nl.sbuf / nl.psum ones (the guide's way to tell a
    lifetime conflict from a kernel's own bug)."""
    def mark(kernel):
        kernel.force_auto_alloc = True          # read by nkisim.runtime.trace_kernel
    return _decorate(func, mark)


# called as decorators at import time: a wrong argument is an ArgumentError naming the signature
skip_middle_end_transformations = kernel_facing(skip_middle_end_transformations,
                                                "nki.compiler.skip_middle_end_transformations")
enable_stack_allocator = kernel_facing(enable_stack_allocator, "nki.compiler.enable_stack_allocator")
force_auto_alloc = kernel_facing(force_auto_alloc, "nki.compiler.force_auto_alloc")


# ----- direct allocation: ncc.sbuf and ncc.psum ------------------------------------------------------

class _Allocators:
    """ncc.sbuf / ncc.psum: alloc, mod_alloc and auto_alloc of one buffer."""

    def __init__(self, prefix: str, **functions) -> None:
        self._prefix = prefix
        self.__dict__.update(functions)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise no_such_name(self._prefix, name, ["alloc", "mod_alloc", "auto_alloc"])

    def __repr__(self) -> str:
        return f"<module {self._prefix.rstrip('.')}>"


def _sbuf_alloc(func):
    """Place each logical tile (block index) of the tensor at func(idx, pdim_size, fdim_size) =
    (start_partition, byte_addr)."""
    return direct_alloc.alloc(Buffer.SBUF, func)


def _sbuf_mod_alloc(*, base_addr, base_partition=0, num_par_tiles=(), num_free_tiles=()):
    """Modulo allocation: block index i goes to physical tile i modulo num_par_tiles x num_free_tiles."""
    return direct_alloc.sbuf_mod_alloc(base_addr, base_partition, num_par_tiles, num_free_tiles)


def _sbuf_auto_alloc():
    """Automatic allocation: buffer=ncc.sbuf.auto_alloc() is buffer=nl.sbuf."""
    return Buffer.SBUF


def _psum_alloc(func):
    """Place each logical tile of the tensor at func(idx, pdim_size, fdim_size) = (bank_id,
    start_partition, byte_addr)."""
    return direct_alloc.alloc(Buffer.PSUM, func)


def _psum_mod_alloc(*, base_bank, base_addr=0, base_partition=0, num_bank_tiles=(), num_par_tiles=(),
                    num_free_tiles=()):
    """Modulo allocation over PSUM banks: block index i goes to bank base_bank + i modulo num_bank_tiles."""
    return direct_alloc.psum_mod_alloc(base_bank, base_addr, base_partition, num_bank_tiles, num_par_tiles,
                                       num_free_tiles)


def _psum_auto_alloc():
    """Automatic allocation: buffer=ncc.psum.auto_alloc() is buffer=nl.psum."""
    return Buffer.PSUM


sbuf = _Allocators("nki.compiler.sbuf.",
                   alloc=kernel_facing(_sbuf_alloc, "nki.compiler.sbuf.alloc"),
                   mod_alloc=kernel_facing(_sbuf_mod_alloc, "nki.compiler.sbuf.mod_alloc"),
                   auto_alloc=kernel_facing(_sbuf_auto_alloc, "nki.compiler.sbuf.auto_alloc"))
psum = _Allocators("nki.compiler.psum.",
                   alloc=kernel_facing(_psum_alloc, "nki.compiler.psum.alloc"),
                   mod_alloc=kernel_facing(_psum_mod_alloc, "nki.compiler.psum.mod_alloc"),
                   auto_alloc=kernel_facing(_psum_auto_alloc, "nki.compiler.psum.auto_alloc"))


# what kernels see as neuronxcc.nki.compiler (nkisim.facade.api_view): the directives and
# allocators above, and the documented allocation controls nkisim does not simulate
DOCUMENTED = ("skip_middle_end_transformations", "enable_stack_allocator", "force_auto_alloc", "sbuf", "psum")
_NOT_SIMULATED = {name: "leave the allocation to the compiler (nl.sbuf / nl.psum buffers), or place tiles with "
                        "nki.compiler.sbuf.alloc / mod_alloc"
                  for name in ("multi_buffer", "no_reorder", "allocation_scope")}


def _api():
    view = api_view(sys.modules[__name__], DOCUMENTED)
    view.__getattr__ = make_getattr("nki.compiler.", vars(view), _NOT_SIMULATED,
                                    lambda: "nki.compiler." + ", nki.compiler.".join(DOCUMENTED))
    return view


API = _api()
