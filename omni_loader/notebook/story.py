"""What the PR changed, shown as the code that runs: the two buffer-discovery rules (notebooks 01 and 03).

The text is :mod:`~omni_loader.token2wav.discovery`'s own functions read with :mod:`inspect`, docstrings stripped,
so what a notebook shows is what every benchmark runs.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable


def without_docstring(function: Callable) -> str:
    """``function``'s source as written, its docstring left out."""
    source = textwrap.dedent(inspect.getsource(function))
    node = ast.parse(source).body[0]
    if ast.get_docstring(node, clean=False) is None:
        return source.rstrip()
    lines, first = source.splitlines(), node.body[0]
    return "\n".join(lines[:first.lineno - 1] + lines[first.end_lineno:]).rstrip()


def rules_as_code() -> str:
    """Markdown: the baseline rule and the optimized rule as the kit runs them, each under a sentence."""
    from ..token2wav import discovery

    before = without_docstring(discovery.RULES["baseline"])
    after = "\n\n\n".join(without_docstring(f) for f in (discovery.non_persistent_buffer_names,
                                                          discovery.RULES["optimized"]))
    return (
        "**Before** (`baseline`, the rule of vLLM-Omni's loader before the PR): for each named buffer, build the whole state dict "
        "(a walk of every module) and ask whether the name is in it. B buffers cost B walks of N modules.\n\n"
        f"```python\n{before}\n```\n\n"
        "**After** (`optimized`, the PR's rule): one walk of the module tree collects the names that "
        "`register_buffer(..., persistent=False)` recorded; every other named buffer is persistent. "
        f"N modules and B buffers are each visited once.\n\n```python\n{after}\n```"
    )
