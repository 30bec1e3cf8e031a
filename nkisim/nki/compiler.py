"""`neuronxcc.nki.compiler`: compiler directives. None changes what a kernel computes."""
from ..runtime import Kernel, as_kernel


def skip_middle_end_transformations(func=None):
    """Skip the middle end (no loop fusion, no pipelining). The cost model reads this flag."""
    def mark(f):
        kernel = as_kernel(f) if not isinstance(f, Kernel) else f
        kernel.skip_middle_end = True
        return kernel
    return mark if func is None else mark(func)


def enable_stack_allocator(func=None, **kwargs):
    return (lambda f: f) if func is None else func


def force_auto_alloc(func=None, **kwargs):
    return (lambda f: f) if func is None else func
