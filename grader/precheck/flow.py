"""What each name of a kernel file may stand for, among the things it imports."""
from __future__ import annotations

import ast
from collections import deque

from .policies import star_names, submodule
from .scopes import COMPREHENSIONS, FUNCTION_SCOPES

MAX_PATH_DEPTH = 12       # dotted components: neuronxcc.nki.isa.constants.engine.vector has 6
MAX_OBJECT_DEPTH = 2      # attributes past the last module: os.environ.get, sys.float_info.max
MAX_PATHS = 200_000       # aliases in all: far beyond any real kernel file


class TooComplexError(Exception):
    """The file's aliases grow past what a kernel file needs; it is refused, not guessed at."""


# Builtins that hand back an element of their argument, or their argument's elements.
_ELEMENT_OF = frozenset({"next", "min", "max"})
_CONTAINER_OF = frozenset({"iter", "list", "tuple", "set", "frozenset", "sorted", "reversed", "enumerate", "zip",
                           "dict"})
# Builtins that only look at a value: passing a module to them loses nothing.
LOOKS_ONLY = frozenset({"print", "dir", "id", "repr", "str", "isinstance", "issubclass", "hasattr", "callable",
                         "len", "hash", "bool", "format"})


class Flow:
    """Which imported things (dotted paths like "numpy.testing") each name may stand for,
    through imports, aliases, parameters (from defaults and from calls of the file's own
    functions), return values, loop variables and containers. Names are keyed by the binding
    they refer to (Scopes.key), so a local that happens to share an import's name is its own.
    `alias[key]`: what the name may be; `holds[key]`: what a container in it may hold.
    Calls meet definitions in slots named after the function ("f#0" its first positional
    argument, "f=k" keyword k, "f*" anything unpacked, "f->" what it returns), so the work
    stays linear in the file's size however many calls and definitions share a name."""

    def __init__(self, nodes: list[ast.AST], scopes):
        self.scopes = scopes
        self._size = 0
        self._depths: dict[str, int] = {}
        methods = {id(stmt) for node in nodes if isinstance(node, ast.ClassDef) for stmt in node.body}
        self.alias: dict[str, set[str]] = {}
        self.holds: dict[str, set[str]] = {}
        self.imported: set[str] = set()              # module paths named by `import a.b` (and a)
        self.functions: dict[str, list] = {}         # the file's own functions (a class: its __init__)
        self.classes: set[str] = set()
        self.starred: set[str] = set()               # names bound by `from m import *`
        for node in nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    parts = a.name.split(".")
                    self.imported.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
                    self._add(self.alias, self._bound(node, a.asname or parts[0]), {a.name if a.asname else parts[0]})
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    names = star_names(node.module) or () if a.name == "*" else [(a.asname or a.name, a.name)]
                    for bound, name in names:
                        self._add(self.alias, self._bound(node, bound), {f"{node.module}.{name}"})
                        if a.name == "*":
                            self.starred.add(self._bound(node, bound))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(node) not in methods:
                self.functions.setdefault(node.name, []).append(node)   # a method is never called by bare name
            elif isinstance(node, ast.ClassDef):
                self.classes.add(node.name)
                inits = [stmt for stmt in node.body
                         if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "__init__"]
                if inits:                              # without one, its arguments go to a base class
                    self.functions.setdefault(node.name, []).extend(inits)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.functions.setdefault(t.id, []).append(node.value)
        self._solve(list(self._collect(nodes)))

    def _add(self, table, name, paths) -> bool:
        if not paths:
            return False
        known = table.setdefault(name, set())
        before = len(known)
        # `x = x.next` in a loop would grow x.next.next... without end; no module object lies
        # that deep, so longer paths are dropped.
        known.update(p for p in paths if p.count(".") < MAX_PATH_DEPTH)
        grown = len(known) - before
        self._size += grown
        if self._size > MAX_PATHS:
            raise TooComplexError(f"more than {MAX_PATHS} aliases")
        return grown > 0

    def _bound(self, node, name: str) -> str:
        """The key of `name` as bound by `node` (an import, a case pattern)."""
        return self.scopes.key_in(self.scopes.scope_of.get(id(node), self.scopes.module), name)

    def _collect(self, nodes):
        """(target, source, how): the target (a name or a slot) takes what the source (an
        expression or a slot) is ("is") or what it holds ("each")."""
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    yield from self._unpack(t, node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                yield self.scopes.key(node.target), node.value, "each"      # xs += [m]: xs now holds m
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                for name in _names_in(node.target):
                    yield self.scopes.key(name), node.iter, "each"
            elif isinstance(node, ast.Match):
                for case in node.cases:
                    for capture, name in _captures(case.pattern):
                        yield self._bound(capture, name), node.subject, "is"
                        yield self._bound(capture, name), node.subject, "each"
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        for name in _names_in(item.optional_vars):
                            yield self.scopes.key(name), item.context_expr, "is"
            elif isinstance(node, ast.Call):
                if isinstance(node.func, ast.Lambda):
                    yield from self._parameters(node.func, "(lambda)")
                    yield from self._call_site(node, "(lambda)")
                elif isinstance(node.func, ast.Name) and node.func.id in self.functions:
                    yield from self._call_site(node, node.func.id)
            if isinstance(node, FUNCTION_SCOPES):
                yield from self._defaults(node)
        for name, defs in self.functions.items():
            for fn in defs:
                yield from self._parameters(fn, name)
                if name not in self.classes:
                    for result, yielded in _results(fn):
                        yield f"{name}->", result, "into" if yielded else "is"

    def _unpack(self, target, value):
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts) and not any(isinstance(e, ast.Starred) for e in target.elts):
            for t, v in zip(target.elts, value.elts):
                yield from self._unpack(t, v)
        elif isinstance(target, ast.Name):
            yield self.scopes.key(target), value, "is"
        else:
            for name in _names_in(target):
                yield self.scopes.key(name), value, "each"

    def _param(self, fn, name: str) -> str:
        return self.scopes.key_in(self.scopes.def_scope[id(fn)], name)

    def _defaults(self, fn):
        args = fn.args
        positional = [*args.posonlyargs, *args.args]
        for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults):
            yield self._param(fn, a.arg), d, "is"
        for a, d in zip(args.kwonlyargs, args.kw_defaults):
            if d is not None:
                yield self._param(fn, a.arg), d, "is"

    @staticmethod
    def _call_site(call: ast.Call, name: str):
        for i, value in enumerate(call.args):
            if isinstance(value, ast.Starred):
                yield f"{name}*", value.value, "each"
            else:
                yield f"{name}#{i}", value, "is"
                yield f"{name}*", value, "is"
        for kw in call.keywords:
            yield (f"{name}={kw.arg}", kw.value, "is") if kw.arg else (f"{name}*", kw.value, "each")
            yield f"{name}*", kw.value, "is"

    def _parameters(self, fn, name: str):
        args = fn.args
        positional = [*args.posonlyargs, *args.args]
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == "__init__":
            positional = positional[1:]                     # self
        for i, a in enumerate(positional):
            yield self._param(fn, a.arg), f"{name}#{i}", "slot"
            yield self._param(fn, a.arg), f"{name}={a.arg}", "slot"
        for a in args.kwonlyargs:
            yield self._param(fn, a.arg), f"{name}={a.arg}", "slot"
        for a in [*positional, *args.kwonlyargs]:
            yield self._param(fn, a.arg), f"{name}*", "slot"    # unpacked arguments may land anywhere
        for a in [args.vararg, args.kwarg]:
            if a is not None:
                yield self._param(fn, a.arg), f"{name}*", "gather"   # *args, **kwargs: containers of them

    def _solve(self, flows):
        """Apply the flows to a fixpoint with a work list: a flow runs again only when
        something it reads has grown, so the work is bounded by the growth, not by rounds."""
        readers: dict[str, list[int]] = {}
        for i, (_, source, _how) in enumerate(flows):
            for key in self._reads(source):
                readers.setdefault(key, []).append(i)
        queue = deque(range(len(flows)))
        queued = set(queue)
        while queue:
            i = queue.popleft()
            queued.discard(i)
            target, source, how = flows[i]
            if self._apply(target, source, how):
                for j in readers.get(target, ()):
                    if j not in queued:
                        queued.add(j)
                        queue.append(j)

    def _reads(self, source) -> set[str]:
        if isinstance(source, str):
            return {source}
        keys = set()
        for n in ast.walk(source):
            if isinstance(n, ast.Name):
                keys.add(self.scopes.key(n))
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in self.functions:
                keys.add(f"{n.func.id}->")
        return keys

    def _apply(self, target: str, source, how: str) -> bool:
        if how == "slot":
            is_, holds = self.alias.get(source), self.holds.get(source)
        elif how == "gather":
            is_ = holds = self.alias.get(source, set()) | self.holds.get(source, set())
        elif how == "into":                           # a generator's yields: what its iterator holds
            is_, holds = set(), self.resolve(source) | self.contents(source)
        elif how == "is":
            is_, holds = self.resolve(source), self.contents(source)
        else:
            is_ = holds = self.contents(source)
        grew = self._add(self.alias, target, is_)
        return self._add(self.holds, target, holds) or grew

    # -- what an expression may be, and what it may contain
    def resolve(self, node) -> set[str]:
        if isinstance(node, ast.Name):
            return set(self.alias.get(self.scopes.key(node), ()))
        if isinstance(node, ast.Attribute):
            return {f"{p}.{node.attr}" for p in self.resolve(node.value) if self._object_depth(p) < MAX_OBJECT_DEPTH}
        if isinstance(node, ast.Subscript):
            return self.contents(node.value) | {p for p in self.resolve(node.value)
                                                if p not in self.imported and "." in p}
        if isinstance(node, (ast.IfExp, ast.BoolOp)):
            parts = [node.body, node.orelse] if isinstance(node, ast.IfExp) else node.values
            return set().union(*(self.resolve(p) for p in parts))
        if isinstance(node, (ast.NamedExpr, ast.Starred, ast.Await)):
            return self.resolve(node.value)
        if isinstance(node, ast.Call):
            return self._call(node, want_contents=False)
        return set()

    def _object_depth(self, path: str) -> int:
        """How many attributes `path` goes past its last module (os.environ.get: 2)."""
        depth = self._depths.get(path)
        if depth is None:
            parts = path.split(".")
            module, last = parts[0], 0
            for i in range(1, len(parts)):
                prefix = ".".join(parts[:i + 1])
                module = prefix if prefix in self.imported else submodule(module, parts[i])
                if module is None:
                    break
                last = i
            depth = self._depths[path] = len(parts) - 1 - last
        return depth

    def contents(self, node) -> set[str]:
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return set().union(*(self.resolve(e) | self.contents(e) for e in node.elts))
        if isinstance(node, ast.Dict):
            return set().union(*(self.resolve(e) | self.contents(e) for e in [*node.keys, *node.values] if e))
        if isinstance(node, COMPREHENSIONS):
            results = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            return set().union(*(self.resolve(e) | self.contents(e) for e in results))
        if isinstance(node, ast.Name):
            return set(self.holds.get(self.scopes.key(node), ()))
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            return self.contents(node.value)
        if isinstance(node, ast.BinOp):                # xs + [m], [m] * 3
            return self.contents(node.left) | self.contents(node.right)
        if isinstance(node, (ast.IfExp, ast.BoolOp)):
            parts = [node.body, node.orelse] if isinstance(node, ast.IfExp) else node.values
            return set().union(*(self.contents(p) for p in parts))
        if isinstance(node, (ast.NamedExpr, ast.Starred, ast.Await)):
            return self.contents(node.value)
        if isinstance(node, ast.Call):
            return self._call(node, want_contents=True)
        return set()

    def _call(self, node: ast.Call, want_contents: bool) -> set[str]:
        func = node.func
        arguments = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(func, ast.Lambda):
            return self.contents(func.body) if want_contents else self.resolve(func.body)
        if isinstance(func, ast.Name) and func.id in self.functions:
            return set((self.holds if want_contents else self.alias).get(f"{func.id}->", ()))
        if isinstance(func, ast.Name) and not node.keywords:
            if func.id in _ELEMENT_OF:                # next(it), max(xs): one of the elements
                return set().union(set(), *(self.contents(a) for a in arguments))
            if func.id in _CONTAINER_OF:              # list(xs), zip(xs, ys): a new container of them
                return set().union(set(), *(self.contents(a) | self.resolve(a) for a in arguments)) \
                    if want_contents else set()
        if isinstance(func, ast.Attribute):
            return self.contents(func.value)          # d.get("k"), xs.pop(): an element of a container
        return set()

    def tracks_arguments(self, call: ast.Call) -> bool:
        """Whether what a call's arguments stand for stays known: the file's own functions and
        the container builtins above follow them; the looking-only builtins keep nothing."""
        func = call.func
        if isinstance(func, ast.Lambda) or isinstance(func, ast.Name) and func.id in self.functions:
            return True
        return isinstance(func, ast.Name) and (
            func.id in LOOKS_ONLY or func.id in _ELEMENT_OF | _CONTAINER_OF and not call.keywords)


def _names_in(target) -> list[ast.Name]:
    return [n for n in ast.walk(target) if isinstance(n, ast.Name)]


def _captures(pattern) -> list[tuple[ast.AST, str]]:
    """The names a `case` pattern binds, with the pattern node that binds each."""
    names = []
    for n in ast.walk(pattern):
        if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            names.append((n, n.name))
        elif isinstance(n, ast.MatchMapping) and n.rest:
            names.append((n, n.rest))
    return names


def _results(fn) -> list[tuple[ast.AST, bool]]:
    """The expressions a function of the file hands back (returns, a lambda's body), and
    whether each is yielded (a generator: calling it gives an iterator over them)."""
    if isinstance(fn, ast.Lambda):
        return [(fn.body, False)]
    found = []
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)) and node.value is not None:
            found.append((node.value, not isinstance(node, ast.Return)))
        stack.extend(ast.iter_child_nodes(node))
    return found
