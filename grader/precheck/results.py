"""What the precheck reports, and the small parsing helpers every check shares."""
from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class Violation:
    line: int
    rule: str        # syntax | import | module-use | forbidden-call | dunder | private | internals |
                     # monkey-patch | module-escape | file-io | unused-import | debugger | compute-instruction |
                     # dialect
    message: str
    severity: str = "error"     # "error" rejects the file; "warning" is only reported


def parse(source: str, filename: str):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source, filename), None
    except SyntaxError as err:
        return None, Violation(err.lineno or 0, "syntax",
                               f"{filename} does not parse ({err.msg}), so it cannot be checked.")
    except (ValueError, RecursionError, MemoryError) as err:
        return None, Violation(0, "syntax", f"{filename} cannot be parsed ({type(err).__name__}), "
                                            f"so it cannot be checked.")


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def src(node) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def dedupe_sorted(violations):
    return sorted(set(violations), key=lambda v: (v.line, v.rule, v.message))
