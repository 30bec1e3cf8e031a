"""Static checks of untrusted kernel source, by AST only: the code is never imported or run.

`precheck` is the second wall behind the sandbox and trace-then-execute (the kernel never
holds values; the grader executes its traced program). It rejects (severity "error") only
what reaches files, processes, the network or interpreter internals: calls of open, exec,
eval, compile, __import__, breakpoint and reflective builtins; modules that reach those
(subprocess, socket, ctypes, importlib, pickle, ...) and the harmful corners of otherwise
harmless ones (os.system, sys.modules, np.testing.runstring, np.load, ...); dunder and
frame attributes; patching imported modules, also through aliases, parameters and
containers. Anything else a real kernel file does is fine, and what is merely untidy (an
unused or debugging import, a pdb.set_trace left in, forbidden code in the
`if __name__ == "__main__":` block that grading never runs) is a warning. Annotations written
as strings are checked as the code they hold (typing.get_type_hints, which functools.singledispatch
and dataclasses call, evaluates them).

What it cannot promise: the standard library evaluates text in more places than an AST check can
follow (a typing.ForwardRef built from a computed string, say). The precheck narrows what a file
can try; the sandbox (no network, no other files, its own namespaces) is the boundary.

A spec names the NKI dialect its kernels are written in (`precheck(..., dialect=spec.dialect)`):
that dialect's modules are the API (neuronxcc.nki; or nki.language, nki.isa, nki.typing and
nki.jit), and a file importing the other dialect's package, or both, gets one error naming the
assignment's dialect, the file's, and the first migration rule the file breaks.

`compute_violations` enforces per-problem instruction rules, e.g. that part 1's
matrix_transpose computes only with nisa.nc_transpose (by instruction name, in either dialect).

Modules: results (what is reported), policies (what each module may be used for), scopes
(which names are builtins), flow (what each name may stand for), checker (the rules),
migration (the first migration rule a file in the wrong dialect breaks), compute (the
instruction rules).
"""
from .checker import precheck
from .compute import compute_violations
from .results import Violation

__all__ = ["Violation", "compute_violations", "precheck"]
