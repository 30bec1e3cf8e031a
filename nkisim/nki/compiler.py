"""`neuronxcc.nki.compiler`: compiler directives, with SDK 2.26's signatures (an undocumented
keyword is an ArgumentError). None changes what a kernel computes; each marks the kernel."""
import numbers

from ..errors import ArgumentError, KernelContractError
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
    """Turn automatic allocation on, ignoring direct allocations in the kernel (nkisim allocates
    automatically in any case: the direct allocators are not simulated)."""
    def mark(kernel):
        kernel.force_auto_alloc = True
    return _decorate(func, mark)


# called as decorators at import time: a wrong argument is an ArgumentError naming the signature
skip_middle_end_transformations = kernel_facing(skip_middle_end_transformations,
                                                "nki.compiler.skip_middle_end_transformations")
enable_stack_allocator = kernel_facing(enable_stack_allocator, "nki.compiler.enable_stack_allocator")
force_auto_alloc = kernel_facing(force_auto_alloc, "nki.compiler.force_auto_alloc")
