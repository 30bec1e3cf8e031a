"""The precheck itself: every rule, applied over one walk of the file's syntax tree."""
from __future__ import annotations

import ast
import string
from typing import Iterable

from ..dialect import LEGACY, Dialect, dialect_named, dialect_of_import, file_message
from .flow import LOOKS_ONLY, Flow, TooComplexError
from .migration import first_rule
from .policies import (CALL_RULES, FILES, NATIVE, TEMPLATE_MODULES, is_module, judge, mutable_module_value, policy_of,
                       star_names, submodule)
from .results import Violation, is_dunder, parse, src
from .scopes import FORBIDDEN_BUILTINS, Scopes

# Dunder names and attributes that only read harmless strings or call ordinary protocol methods.
_HARMLESS_DUNDER_NAMES = frozenset({"__name__", "__file__", "__doc__", "__debug__", "__annotations__",
                                    "__qualname__", "__module__", "__all__", "__version__", "__author__"})
_ASSIGNABLE_DUNDERS = frozenset({"__all__", "__version__", "__author__", "__doc__", "__slots__"})
_HARMLESS_DUNDER_ATTRS = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__version__", "__len__",
                                    "__repr__", "__str__", "__module__", "__post_init__"})
# Attributes of frames, tracebacks, generators and code objects: a way to other modules' globals.
_FRAME_ATTRS = frozenset({"tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins", "f_code",
                          "f_trace", "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await",
                          "ag_frame", "ag_code", "ag_await", "co_code", "co_consts", "co_names", "func_globals",
                          "func_code"})
# Methods that change how the interpreter or numpy treat an object: a way to forge values.
_PROTOCOL_HOOKS = frozenset({
    "__array__", "__array_interface__", "__array_struct__", "__array_function__", "__array_ufunc__",
    "__array_wrap__", "__array_finalize__", "__array_priority__", "__float__", "__int__", "__index__",
    "__complex__", "__dlpack__", "__buffer__"})
_DEAD_NOTE = (" It is code that only the `if __name__ == \"__main__\":` block reaches, and grading never runs "
              "it, so this is only a warning.")
_DELETE = "Delete it (and the code that uses it)."


def precheck(source: str, filename: str, entry_points: Iterable[str] | None = None,
             dialect: str = LEGACY.name) -> list[Violation]:
    """Every finding in one kernel file, each once, sorted by line: severity "error" rejects
    the file, "warning" is only reported. An empty list means nothing was found.

    `entry_points`: the functions the grader calls (default: every problem's kernel). Findings
    in code that only the `__main__` block reaches are warnings. `dialect`: the NKI dialect
    the assignment is written in (a spec's `dialect`); a file importing the other one's
    package gets one error saying so."""
    tree, error = parse(source, filename)
    if error:
        return [error]
    if entry_points is None:
        entry_points = _problem_kernels()
    try:
        return _Checker(tree, filename, frozenset(entry_points) if entry_points is not None else None,
                        dialect_named(dialect)).run()
    except RecursionError:
        return [Violation(0, "syntax", f"{filename} nests expressions too deeply to be checked; split the deepest "
                                       f"expression into several statements.")]
    except TooComplexError as err:
        return [Violation(0, "syntax", f"{filename} is too tangled to be checked ({err}); a kernel file passes "
                                       f"modules around far less. Use the imported names directly.")]


def _problem_kernels() -> frozenset[str] | None:
    try:
        from .. import problems
    except ImportError:
        return None                                   # unknown: no function is taken for dead code
    return frozenset(p.kernel for p in problems.REGISTRY.values())


class _Checker:
    def __init__(self, tree: ast.Module, filename: str, entry_points: frozenset[str] | None,
                 dialect: Dialect = LEGACY):
        self.dialect = dialect
        # typing.get_type_hints (singledispatch, dataclasses) evaluates string annotations:
        # they are checked as the code they are
        annotations = _StringAnnotations()
        tree = annotations.visit(tree)
        self.nodes, self.parent = _walk(tree)
        if any(isinstance(n, ast.Name) and n.id == "getattr" for n in self.nodes) \
                and not _binds(self.nodes, "getattr"):
            tree = _LiteralGetattr().visit(tree)
            self.nodes, self.parent = _walk(tree)
        self.tree = tree
        self.dead = set() if filename.rsplit("/", 1)[-1] == "__main__.py" else \
            _dead_code(tree, self.nodes, _main_block(tree), entry_points)
        self.scopes = Scopes(tree)
        self.flow = Flow(self.nodes, self.scopes)
        self.imported = frozenset(self.flow.imported)
        self.out: list[Violation] = []
        for node in annotations.unparsable:
            self.add(node, "internals", f"the annotation {src(node)} is a string that is not a Python expression; "
                                        "annotations written as strings are evaluated as code (typing.get_type_hints). "
                                        "Write the type itself, or leave the annotation out.")

    def add(self, node, rule: str, message: str, severity: str = "error"):
        if severity == "error" and id(node) in self.dead:
            severity, message = "warning", message + _DEAD_NOTE
        self.out.append(Violation(getattr(node, "lineno", 0), rule, message, severity))

    def run(self) -> list[Violation]:
        self.check_imports()
        self.check_dialect()
        for node in self.nodes:
            if isinstance(node, ast.Name):
                self.check_name(node)
            elif isinstance(node, ast.Attribute):
                self.check_attribute(node)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self.check_subscript_store(node)
            elif isinstance(node, ast.Call):
                self.check_call(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _PROTOCOL_HOOKS:
                self.add(node, "dunder", f"defining {node.name} is not allowed: it changes how the interpreter "
                                         f"or numpy treat an object, a way to forge values. {_DELETE}")
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                self.check_stored_value(node)
        return sorted(set(self.out), key=lambda v: (v.line, v.severity, v.rule, v.message))

    # -- imports
    def check_imports(self):
        uses: dict[str, list[ast.Name]] = {}
        for node in self.nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                uses.setdefault(node.id, []).append(node)
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    shown = f"import {a.name}" + (f" as {a.asname}" if a.asname else "")
                    self.check_import(node, a.name, shown, uses.get(a.asname or a.name.split(".")[0], []))
            elif isinstance(node, ast.ImportFrom):
                shown = f"from {'.' * node.level}{node.module or ''} import"
                if node.level:
                    self.add(node, "import", f"`{shown} ...` is not allowed: a kernel file is graded on its own, "
                                             f"so it cannot import files beside it. Put the helper in this file.")
                    continue
                for a in node.names:
                    refused = judge(node.module) if a.name == "*" else None
                    if refused:
                        self.add(node, "import", f"`{shown} *` is not allowed: {refused[0]}. {_DELETE}")
                        continue
                    if a.name == "*" and star_names(node.module):
                        continue                      # each name it binds is judged where it is used
                    if a.name == "*":
                        self.add(node, "import", f"`{shown} *` is not allowed: a star import hides which names the "
                                                 f"kernel uses, so they cannot be checked. Import the module under "
                                                 f"an alias instead (`import {node.module} as ...`).")
                    else:
                        self.check_import(node, f"{node.module}.{a.name}",
                                          f"{shown} {a.name}" + (f" as {a.asname}" if a.asname else ""),
                                          uses.get(a.asname or a.name, []))

    def check_dialect(self):
        """One error (one warning, when only dead code imports it) for a file that imports
        another NKI dialect's package than the assignment's: both dialects, and the first
        migration rule the file breaks."""
        imports: dict[Dialect, list] = {}
        for node in self.nodes:
            if isinstance(node, ast.Import):
                paths = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                paths = [node.module] + [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
            else:
                continue
            for found in {d for d in map(dialect_of_import, paths) if d is not None}:
                imports.setdefault(found, []).append(node)
        wrong = sorted(((n.lineno, d.name, n) for d, nodes in imports.items() if d != self.dialect for n in nodes),
                       key=lambda item: (id(item[2]) in self.dead, item[0]))    # live imports first
        if not wrong:
            return
        _, name, node = wrong[0]
        mixed = any(id(n) not in self.dead for n in imports.get(self.dialect, ()))
        rule = first_rule(self.nodes, self.flow, self.parent, self.dead, self.dialect)
        self.add(node, "dialect", file_message(self.dialect, dialect_named(name), mixed, rule))

    def check_import(self, node, path: str, shown: str, uses: list[ast.Name]):
        dunders = [p for p in path.split(".") if is_dunder(p) and p not in _HARMLESS_DUNDER_NAMES | {"__future__"}]
        if dunders:
            self.add(node, "dunder", f"`{shown}` is not allowed: {dunders[0]} is an interpreter internal. {_DELETE}")
            return
        refused = judge(path)
        if refused:
            self.add(node, "import", f"`{shown}` is not allowed: {refused[0]}. {_DELETE}")
            return
        top = path.split(".")[0]
        live = [u for u in uses if id(u) not in self.dead]
        if policy_of(top) is None:
            if live:
                self.add(node, "import", f"`{shown}` is not allowed: {top} is used (line {live[0].lineno}), and a "
                                         f"kernel file may use only numpy, math, {self.dialect.package} and harmless standard "
                                         f"modules (typing, dataclasses, functools, itertools, collections, "
                                         f"logging, time, ...). {_DELETE}")
            elif uses:
                self.add(node, "unused-import", f"`{shown}` is used only by code that grading never runs (the "
                                                f"`if __name__ == \"__main__\":` block and what only it calls).",
                         "warning")
            else:
                self.add(node, "unused-import", f"`{shown}` is never used; delete it.", "warning")
        elif top == "pdb":
            self.add(node, "debugger", f"`{shown}`: a debugging import; it is harmless, but delete it before "
                                       f"submitting.", "warning")
        elif not uses and top not in TEMPLATE_MODULES:
            self.add(node, "unused-import", f"`{shown}` is never used; delete it.", "warning")

    # -- names
    def check_name(self, node: ast.Name):
        name = node.id
        if isinstance(node.ctx, ast.Load) and self.scopes.key(node) in self.flow.starred:
            self.judge_use(node)
        if name in FORBIDDEN_BUILTINS and isinstance(node.ctx, ast.Load):
            parent = self.parent.get(id(node))
            called = isinstance(parent, ast.Call) and parent.func is node
            if name == "locals" and called and self.scopes.in_function(node):
                return                                # a function's own locals: `print(locals())` debugging
            if self.scopes.is_builtin(node):
                what = f"call to {name}()" if called else f"reference to the built-in {name}"
                self.add(node, "forbidden-call", f"{what} is not allowed in a kernel file: "
                                                 f"{FORBIDDEN_BUILTINS[name]}. {_DELETE}")
            return
        if not is_dunder(name):
            return
        if isinstance(node.ctx, ast.Load) and name not in _HARMLESS_DUNDER_NAMES:
            self.add(node, "dunder", f"use of the name {name} is not allowed: it exposes interpreter internals "
                                     f"that can bypass these checks. {_DELETE}")
        elif not isinstance(node.ctx, ast.Load) and name not in _ASSIGNABLE_DUNDERS:
            self.add(node, "dunder", f"assigning to {name} is not allowed: it changes how the interpreter treats "
                                     f"this file. {_DELETE}")

    # -- attributes
    def check_attribute(self, node: ast.Attribute):
        attr, shown = node.attr, src(node)
        if is_dunder(attr):
            if attr in ("__init__", "__post_init__") and self.flow.resolve(node.value):
                self.add(node, "monkey-patch", f"`{shown}` is not allowed: it re-initialises an object an imported "
                                               f"module owns, which changes it for the grader too. {_DELETE}")
            elif attr not in _HARMLESS_DUNDER_ATTRS:
                self.add(node, "dunder", f"access to the attribute {attr} (`{shown}`) is not allowed: dunder "
                                         f"attributes expose interpreter internals that can bypass these checks. "
                                         f"{_DELETE}")
        elif attr in _FRAME_ATTRS:
            self.add(node, "internals", f"access to {attr} (`{shown}`) is not allowed: frames and code objects "
                                        f"reach other modules' globals. {_DELETE}")
        elif attr.startswith("_") and self.flow.resolve(node.value):
            self.add(node, "private", f"access to the private attribute {attr} (`{shown}`) is not allowed: it is "
                                      f"the internals of an imported module. Use its public names.")
        elif attr in ("tofile", "dump") and isinstance(node.ctx, ast.Load):
            self.add(node, "file-io", f"`{shown}` is not allowed: {FILES}; a kernel returns its results only as "
                                      f"its output tensors. {_DELETE}")
        elif attr == "ctypes" and isinstance(node.ctx, ast.Load):
            self.add(node, "internals", f"`{shown}` is not allowed: an array's ctypes interface {NATIVE[3:]}. "
                                        f"{_DELETE}")
        if isinstance(node.ctx, ast.Load):
            parent = self.parent.get(id(node))
            if not (isinstance(parent, ast.Attribute) and parent.value is node):
                judged = node
                while isinstance(judged.value, ast.Attribute) and not self.flow.resolve(judged):
                    judged = judged.value                # past the depth aliases follow: judge what they reach
                self.judge_use(judged)
        else:
            self.check_patch(node)

    def judge_use(self, node):
        for path in sorted(self.flow.resolve(node)):
            refused = judge(path)
            if refused:
                rule = "file-io" if refused[0].startswith(FILES) else "module-use"
                self.add(node, rule, f"`{src(node)}` is not allowed: {refused[0]}. {_DELETE}")
                return

    def check_patch(self, node: ast.Attribute):
        verb = "deleting" if isinstance(node.ctx, ast.Del) else "assigning to"
        root = node.value
        while isinstance(root, (ast.Attribute, ast.Subscript)) and not self.flow.resolve(root):
            root = root.value                        # a.b.c.d = ...: patched if anything on the way is imported
        owners = self.flow.resolve(root)
        if owners:
            self.add(node, "monkey-patch", f"{verb} `{src(node)}` is not allowed: {src(node.value)} comes from an "
                                           f"import ({sorted(owners)[0]}), and changing imported modules or their "
                                           f"objects can tamper with the grader. Use a name of your own.")
        elif isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
                and node.value.func.id == "type" and self.scopes.is_builtin(node.value.func):
            self.add(node, "monkey-patch", f"{verb} `{src(node)}` is not allowed: it patches a class shared with "
                                           f"the simulator. Use a name of your own.")

    def check_subscript_store(self, node: ast.Subscript):
        owners = {p for p in self.flow.resolve(node.value) if not is_module(p, self.imported)}
        if owners:
            self.add(node, "monkey-patch", f"changing `{src(node)}` is not allowed: {src(node.value)} belongs to "
                                           f"an imported module ({sorted(owners)[0]}), and changing it can tamper "
                                           f"with the grader. Copy it into a name of your own first.")

    # -- modules hidden in objects
    def modules_in(self, node) -> list[str]:
        return sorted(p for p in self.flow.resolve(node) | self.flow.contents(node) if is_module(p, self.imported))

    def check_stored_value(self, node):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        in_class = isinstance(self.parent.get(id(node)), ast.ClassDef)
        if not (in_class or any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets)):
            return
        modules = self.modules_in(node.value)
        if modules:
            self.add(node, "module-escape", f"storing the module {modules[0]} in a class or object (`{src(node)}`) "
                                            f"is not allowed: it hides the module from these checks. Use the module "
                                            f"directly.")

    # -- calls
    def check_type_call(self, node: ast.Call):
        """type(x) may be compared, printed or asked for its name; handing the class on lets
        new objects of it be built (a file object from sys.stderr's, say), and type(name,
        bases, dict) builds a class whose methods these checks never saw defined."""
        if len(node.args) == 3:
            self.add(node, "internals", f"`{src(node)}` is not allowed: it builds a class at run time. Write a "
                                        f"class statement instead.")
            return
        parent = self.parent.get(id(node))
        reads = isinstance(parent, _TYPE_READERS) or (
            isinstance(parent, ast.Attribute) and parent.attr in _HARMLESS_DUNDER_ATTRS) or (
            isinstance(parent, ast.Call) and node is not parent.func and isinstance(parent.func, ast.Name)
            and parent.func.id in LOOKS_ONLY)
        if not reads:
            self.add(node, "internals", f"`{src(node)}` is not allowed here: handing on an object's class lets "
                                        f"new objects of it be built (files among them). Compare it, print it or "
                                        f"use isinstance instead.")

    def check_call(self, node: ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "type" and self.scopes.is_builtin(func):
            self.check_type_call(node)
        if isinstance(func, ast.Attribute) and func.attr in _MUTATORS:
            owned = sorted(p for p in self.flow.resolve(func.value) if mutable_module_value(p))
            if owned:
                self.add(node, "monkey-patch", f"`{src(node)}` is not allowed: {src(func.value)} belongs to an "
                                               f"imported module ({owned[0]}), and changing it can tamper with the "
                                               f"grader. Copy it into a name of your own first.")
        for path in sorted(self.flow.resolve(func)):
            canonical = _canonical(path)
            if canonical == "pdb.set_trace":
                self.add(node, "debugger", f"`{src(node)}` stops at a debugger prompt; graded runs have no "
                                           f"terminal, so the run ends there if it is reached. Delete it.", "warning")
            rule = CALL_RULES.get(canonical)
            if rule:
                refused, why = rule
                given = {k.arg for k in node.keywords} | ({"args"} if node.args else set())
                if given & refused:
                    self.add(node, "forbidden-call", f"`{src(node)}` is not allowed: {why}. Call it without "
                                                     f"{', '.join(sorted(given & refused))}.")
        if isinstance(func, ast.Attribute) and func.attr in ("format", "format_map") \
                and isinstance(func.value, ast.Constant) and isinstance(func.value.value, str):
            hidden = _hidden_format_fields(func.value.value)
            if hidden:
                self.add(node, "dunder", f"the format field {{{hidden}}} is not allowed: it reads a dunder or "
                                         f"private attribute by name. {_DELETE}")
        refused_builtin = isinstance(func, ast.Name) and func.id in FORBIDDEN_BUILTINS
        if not refused_builtin and not self.flow.tracks_arguments(node):
            for value in [*node.args, *(k.value for k in node.keywords)]:
                modules = self.modules_in(value)
                if modules:
                    self.add(value, "module-escape", f"passing the module {modules[0]} to `{src(func)}` is not "
                                                     f"allowed: it hides the module from these checks. Use the "
                                                     f"module's functions directly.")
                    break


def _walk(tree):
    """Every node, breadth first like ast.walk, and each node's parent (by id)."""
    parent: dict[int, ast.AST] = {}
    nodes: list[ast.AST] = [tree]
    for node in nodes:
        for child in ast.iter_child_nodes(node):
            parent[id(child)] = node
            nodes.append(child)
    return nodes, parent


_TYPE_READERS = (ast.Compare, ast.FormattedValue, ast.JoinedStr)
# Methods that change a container in place.
_MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "append", "extend", "insert", "remove",
                       "discard", "add", "sort", "reverse", "__setitem__", "__delitem__"})


def _canonical(path: str) -> str:
    """`logging.os.getcwd` -> `os.getcwd`: the path from the last module on it."""
    parts = path.split(".")
    module, i = parts[0], 1
    while i < len(parts):
        sub = submodule(module, parts[i])
        if sub is None:
            break
        module, i = sub, i + 1
    return ".".join([module, *parts[i:]])


def _hidden_format_fields(text: str) -> str | None:
    """A str.format field that reads a dunder or private attribute (`{0.__globals__}`), if any."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return None
    for _, field, spec, _ in parsed:
        if field and any(part.startswith("_") for part in field.replace("[", ".").split(".")[1:]):
            return field
        nested = _hidden_format_fields(spec) if spec else None
        if nested:
            return nested
    return None


def _main_block(tree: ast.Module) -> set[int]:
    """Ids of every node inside the body of a top-level `if __name__ == "__main__":` (not its
    else branch): code that runs only when the file is run as a script, never when graded."""
    dead = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and _is_main_test(stmt.test):
            for inner in stmt.body:
                dead.update(id(n) for n in ast.walk(inner))
    return dead


def _dead_code(tree: ast.Module, nodes, main_block: set[int], entry_points: frozenset[str] | None) -> set[int]:
    """The main block plus the bodies of top-level functions that only it calls (`def main():`
    called from the main block, and what only main calls). Not the grader's
    entry points, not decorated functions (a decorator may register them), not dunder-named
    ones (the interpreter calls those); decorators and defaults run when the def does, so
    only bodies count. With unknown entry points, only the main block is dead."""
    if entry_points is None:
        return set(main_block)
    bound_elsewhere = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)} | \
        {a.asname or a.name.split(".")[0] for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    defs: dict[str, list] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs.setdefault(stmt.name, []).append(stmt)
    candidates = {name: fns[0] for name, fns in defs.items()
                  if len(fns) == 1 and not isinstance(fns[0], ast.ClassDef) and not fns[0].decorator_list
                  and name not in entry_points and name not in bound_elsewhere and not is_dunder(name)}
    body = {name: {id(n) for stmt in fn.body for n in ast.walk(stmt)} for name, fn in candidates.items()}
    loads: dict[str, list[ast.Name]] = {name: [] for name in candidates}
    for n in nodes:
        if isinstance(n, ast.Name) and n.id in loads:
            loads[n.id].append(n)
    dead_functions = set(candidates)
    while True:                                       # the greatest set whose users are all dead
        dead = set(main_block).union(*(body[name] for name in dead_functions))
        alive = {name for name in dead_functions if any(id(u) not in dead for u in loads[name])}
        if not alive:
            break
        dead_functions -= alive
    # Of those, only what the main block calls (directly or through each other): a function
    # nothing calls at all stays checked, since it has no reason to be there.
    reached, frontier = set(), [main_block]
    while frontier:
        ids = frontier.pop()
        for name in dead_functions - reached:
            if any(id(u) in ids for u in loads[name]):
                reached.add(name)
                frontier.append(body[name])
    return set(main_block).union(*(body[name] for name in reached))


def _is_main_test(test) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and \
        any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


def _binds(nodes, name: str) -> bool:
    for node in nodes:
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.arg) and node.arg == name:
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split(".")[0]) == name for a in node.names):
            return True
    return False


class _LiteralGetattr(ast.NodeTransformer):
    """`getattr(x, "name")` is `x.name` (and `getattr(x, "name", d)` is about `x.name or d`), so
    it is judged like one; a computed or underscore name stays a refused getattr call."""

    def visit_Call(self, node):
        self.generic_visit(node)
        args = node.args
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and not node.keywords \
                and len(args) in (2, 3) and not any(isinstance(a, ast.Starred) for a in args) \
                and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str) \
                and args[1].value.isidentifier() and not args[1].value.startswith("_"):
            attr = ast.copy_location(ast.Attribute(args[0], args[1].value, ast.Load()), node)
            return ast.copy_location(ast.BoolOp(ast.Or(), [attr, args[2]]), node) if len(args) == 3 else attr
        return node


class _StringAnnotations(ast.NodeTransformer):
    """Every string inside an annotation (`x: "T"`, `-> list["T"]`) replaced by the expression
    it holds, at the string's place; strings that are no expression are collected."""

    def __init__(self) -> None:
        self.unparsable: list[ast.AST] = []

    def _expand(self, node):
        if node is None:
            return None
        for sub in list(ast.walk(node)):
            for field, value in ast.iter_fields(sub):
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    setattr(sub, field, self._parsed(value))
                elif isinstance(value, list):
                    setattr(sub, field, [self._parsed(v) if isinstance(v, ast.Constant) and isinstance(v.value, str)
                                         else v for v in value])
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return self._parsed(node)
        return node

    def _parsed(self, const: ast.Constant):
        try:
            expr = ast.parse(const.value.strip(), mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            self.unparsable.append(const)
            return const
        expr = self._expand(expr)          # a string inside the string
        for sub in ast.walk(expr):
            ast.copy_location(sub, const)
            if hasattr(sub, "end_lineno"):
                sub.end_lineno, sub.end_col_offset = const.end_lineno, const.end_col_offset
        return expr

    def visit_arg(self, node):
        node.annotation = self._expand(node.annotation)
        return node

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        node.returns = self._expand(node.returns)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node):
        self.generic_visit(node)
        node.annotation = self._expand(node.annotation)
        return node
