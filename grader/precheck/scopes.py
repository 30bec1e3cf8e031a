"""Python's scoping rules, enough to tell whether a name is a builtin."""
from __future__ import annotations

import ast

from .policies import FILES, REFLECT, RUNS_CODE

FORBIDDEN_BUILTINS = {
    "open": FILES,
    "input": "it reads from the terminal, and a kernel gets its data only from its arguments",
    "help": "it starts the interactive help (a pager process)",
    "breakpoint": "it starts a debugger in the grading process",
    "exec": RUNS_CODE,
    "eval": RUNS_CODE,
    "compile": RUNS_CODE,
    "__import__": "it imports modules by name, bypassing these checks",
    "globals": REFLECT,
    "locals": REFLECT,
    "vars": REFLECT,
    "getattr": REFLECT + " (a literal name, getattr(x, \"name\"), is fine)",
    "setattr": REFLECT,
    "delattr": REFLECT,
}
FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _Scope:
    def __init__(self, kind: str, parent: "_Scope | None"):
        self.kind, self.parent = kind, parent          # kind: module | function | class | comprehension
        self.bound: set[str] = set()
        self.declared_global: set[str] = set()
        self.declared_nonlocal: set[str] = set()


class Scopes(ast.NodeVisitor):
    """Python's scoping rules, enough to tell whether a name is a builtin: defaults, decorators
    and annotations belong to the enclosing scope (so `def f(exec=exec)` reads the builtin),
    comprehensions and classes have scopes of their own, functions do not see class scopes.
    At module level a name is the file's own only if bound by an unconditional top-level
    statement before the statement that reads it: lookups there fall back to builtins."""

    def __init__(self, tree: ast.Module):
        self.module = _Scope("module", None)
        self.current = self.module
        self.scope_of: dict[int, _Scope] = {}        # id(Name, import, capture) -> scope it is evaluated in
        self.def_scope: dict[int, _Scope] = {}       # id(function or lambda) -> its own scope
        self._keys: dict[int, str] = {}
        self.statement_of: dict[int, int] = {}       # id(Name) -> index of its top-level statement
        self.module_binding: dict[str, list[tuple[int, bool]]] = {}   # name -> [(statement, plain)]
        self.never_safe: set[str] = set()            # declared global/nonlocal or deleted somewhere
        self.top = 0
        for self.top, stmt in enumerate(tree.body):
            plain = isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.AsyncFunctionDef,
                                      ast.ClassDef, ast.Import, ast.ImportFrom))
            self._plain = stmt if plain else None
            self.visit(stmt)

    # -- bindings
    def _bind(self, name: str, node=None):
        scope = self.current
        self.current.bound.add(name)
        if scope is self.module:
            plain = node is not None and node is self._plain
            self.module_binding.setdefault(name, []).append((self.top, plain))

    def _in(self, kind: str, body):
        outer = self.current
        self.current = _Scope(kind, outer)
        try:
            body(self.current)
        finally:
            self.current = outer

    def visit_Name(self, node):
        self.scope_of[id(node)] = self.current
        self.statement_of[id(node)] = self.top
        if isinstance(node.ctx, ast.Del):
            self.never_safe.add(node.id)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._bind(node.id, self._owner(node))

    def _owner(self, node):
        # the top-level statement that binds `node` directly (x = ..., x: T = ...), if any
        plain = self._plain
        if isinstance(plain, ast.Assign) and any(t is node for t in plain.targets):
            return plain
        if isinstance(plain, ast.AnnAssign) and plain.target is node and plain.value is not None:
            return plain
        return None

    def visit_Global(self, node):
        self.current.declared_global.update(node.names)
        self.never_safe.update(node.names)

    def visit_Nonlocal(self, node):
        self.current.declared_nonlocal.update(node.names)
        self.never_safe.update(node.names)

    def visit_Import(self, node):
        self.scope_of[id(node)] = self.current
        for a in node.names:
            self._bind(a.asname or a.name.split(".")[0], node)

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node):
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)

    def visit_MatchAs(self, node):
        self.scope_of[id(node)] = self.current
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node):
        self.scope_of[id(node)] = self.current
        if node.name:
            self._bind(node.name)

    def visit_MatchMapping(self, node):
        self.scope_of[id(node)] = self.current
        if node.rest:
            self._bind(node.rest)
        self.generic_visit(node)

    def visit_NamedExpr(self, node):
        self.visit(node.value)
        scope = self.current
        while scope.kind == "comprehension":         # := binds in the enclosing function or module
            scope = scope.parent
        outer, self.current = self.current, scope
        self.visit(node.target)
        self.current = outer

    # -- scopes
    def _arguments_outside(self, args: ast.arguments):
        for default in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.visit(default)
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None:
                self.visit(a.annotation)

    @staticmethod
    def _parameters(args: ast.arguments):
        return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
                if a is not None]

    def visit_FunctionDef(self, node):
        for d in node.decorator_list:
            self.visit(d)
        self._arguments_outside(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        self._bind(node.name, node)

        def body(scope):
            self.def_scope[id(node)] = scope
            scope.bound.update(self._parameters(node.args))
            for stmt in node.body:
                self.visit(stmt)
        self._in("function", body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self._arguments_outside(node.args)

        def body(scope):
            self.def_scope[id(node)] = scope
            scope.bound.update(self._parameters(node.args))
            self.visit(node.body)
        self._in("function", body)

    def visit_ClassDef(self, node):
        for n in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(n)
        self._bind(node.name, node)

        def body(scope):
            for stmt in node.body:
                self.visit(stmt)
        self._in("class", body)

    def _comprehension(self, node, *results):
        first, *rest = node.generators
        self.visit(first.iter)

        def body(scope):
            for i, gen in enumerate(node.generators):
                if i:
                    self.visit(gen.iter)
                self.visit(gen.target)
                for cond in gen.ifs:
                    self.visit(cond)
            for r in results:
                self.visit(r)
        self._in("comprehension", body)

    def visit_ListComp(self, node):
        self._comprehension(node, node.elt)

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node):
        self._comprehension(node, node.key, node.value)

    # -- lookups
    # -- which binding a name refers to, as a key for tables of what names stand for
    def key(self, node: ast.Name) -> str:
        found = self._keys.get(id(node))
        if found is None:
            found = self._keys[id(node)] = self.key_in(self.scope_of.get(id(node), self.module), node.id)
        return found

    def key_in(self, scope: "_Scope", name: str) -> str:
        """The binding `name` refers to when read or bound in `scope`, as "<scope id>:<name>":
        a function's local, an enclosing function's (nonlocal or free), a class body's own, or
        the module's (globals, and names bound nowhere)."""
        own = True
        while scope is not self.module:
            if scope.kind == "class":
                if own and name in scope.bound:
                    break
            elif name in scope.declared_global:
                scope = self.module
                break
            elif name in scope.bound and name not in scope.declared_nonlocal:
                break
            own = False
            scope = scope.parent
        return f"{id(scope)}:{name}"

    def in_function(self, node: ast.Name) -> bool:
        """Whether `node` is evaluated in a function's scope (not the module's or a class's)."""
        return self.scope_of.get(id(node), self.module).kind in ("function", "comprehension")

    def is_builtin(self, node: ast.Name) -> bool:
        """Whether reading `node` can reach the builtin of that name."""
        name, scope = node.id, self.scope_of.get(id(node), self.module)
        own = True
        while scope is not self.module:
            if scope.kind == "class":
                if own and name in scope.bound:
                    return True                   # class bodies look names up in order: not provable
            elif name in scope.declared_global:
                break
            elif name in scope.bound and name not in scope.declared_nonlocal:
                return False
            own = False
            scope = scope.parent
        bindings = self.module_binding.get(name)
        if not bindings or name in self.never_safe or not all(plain for _, plain in bindings):
            return True
        return min(statement for statement, _ in bindings) >= self.statement_of.get(id(node), 0)
