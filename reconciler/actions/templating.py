"""Render action templates: Jinja2 in a ``SandboxedEnvironment`` with ``StrictUndefined``.

The dialect (and the short form ``{event}``) is ``reconciler.templates``. The
context of every template (``templates.CONTEXT_NAMES``)::

    event        str   the event summary
    observation  str   the observation text (capped, see ``events.EXCERPT_CHARS``)
    signature    str   the condition's signature
    groups       list  the match regex's groups (None for a group that did not take part)
    monitor      dict  {"name": str, "description": str}
    firedAt      str   ISO-8601 UTC time of the fire

A render error (bad syntax, an undefined name, a sandbox violation, a budget
breach) is an ``errors.ActionError``: the dispatch fails and is recorded, the
daemon goes on.

Budgets: no template can wedge the process. The sandbox stops attribute escapes;
on top of it every render is bounded (a sane message template, a few lines with
a loop over ``groups``, stays orders of magnitude below each limit):

=====================  ==========  ================================================
``RENDER_SECONDS``     1.0 s       wall-clock deadline of one render (compile included)
``MAX_STEPS``          1,000,000   Python line and call events of one render
``MAX_RANGE``          10,000      items of one ``range()``
``MAX_SIZE``           1 MiB       characters (or items) one operation may build
``MAX_INT_BITS``       4,096       bits of an integer ``*`` or ``**`` may build
``MAX_OUTPUT``         1 MiB       characters of the rendered text
=====================  ==========  ================================================

Time and steps are counted by a ``sys.settrace`` function installed only for the
duration of ``render`` in the rendering thread; it raises out of Jinja's compiled
code when a budget is spent. Measured cost on a normal two-line message template:
about 0.08-0.14 ms per render with the budget against 0.014 ms without (median of
7 x 2,000 renders); a render that spends the whole step budget takes about 0.4 s.
Renders run off the event loop (``dispatch`` uses a worker thread), but the
budget holds in any thread. Size is checked *before* the operations that
multiply it: the ``*``, ``**``, ``+`` and ``%`` operators (``intercepted_binops``),
``~`` (checked on its result, whose parts are already bounded), the ``str``
methods ``center ljust rjust zfill expandtabs replace join format format_map``,
growing a ``list``/``dict``/``set`` in place, and the filters ``center indent
format batch replace join``. The output is checked as it is produced, so a loop
that prints forever stops at ``MAX_OUTPUT``.
"""

from __future__ import annotations

import functools
import re
import string
import sys
import time
import types
from collections.abc import Callable, Sized
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.compiler import CodeGenerator, Frame
from jinja2.nodes import Concat
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment

from reconciler import errors, templates
from reconciler.events import Event
from reconciler.model import Monitor

RENDER_SECONDS = 1.0
MAX_STEPS = 1_000_000
MAX_RANGE = 10_000
MAX_SIZE = 1024 * 1024
MAX_INT_BITS = 4096
MAX_OUTPUT = 1024 * 1024
_MAX_OUTPUT = MAX_OUTPUT  # the old private name
_DEADLINE_EVERY = 1024  # steps between two reads of the clock


class BudgetExceeded(BaseException):
    """Raised inside a render when a budget is spent.

    A ``BaseException`` so that no ``except Exception`` inside Jinja can swallow it
    (a trace function that raised is switched off by Python).
    """


def _too_big(what: str, size: int, limit: int = MAX_SIZE) -> jinja2.exceptions.SecurityError:
    return jinja2.exceptions.SecurityError(f"{what} would build {size} (max {limit})")


def _check_size(what: str, size: int) -> None:
    if size > MAX_SIZE:
        raise _too_big(what, size)


def _safe_range(*args: int) -> range:
    rng = range(*args)
    if len(rng) > MAX_RANGE:
        raise jinja2.exceptions.SecurityError(
            f"range() of {len(rng)} items (max {MAX_RANGE})")
    return rng


_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
_SPEC_NUMBER = re.compile(r"\d+")


def _check_printf(fmt: str) -> None:
    """Refuse ``%``-format width/precision over ``MAX_SIZE`` (or given by ``*``)."""
    for m in _PRINTF.finditer(fmt):
        for part in m.groups():
            if part == "*":
                raise jinja2.exceptions.SecurityError("'*' width in a % format")
            if part is not None:
                _check_size("a % format width", int(part))


def _check_format_string(fmt: str) -> None:
    """Refuse ``str.format`` specs with a width over ``MAX_SIZE`` or a nested field."""
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return  # str.format raises the same error itself
    for _, _, spec, _ in parsed:
        if not spec:
            continue
        if "{" in spec:
            raise jinja2.exceptions.SecurityError("nested fields in a format spec")
        for number in _SPEC_NUMBER.findall(spec):
            _check_size("a format width", int(number))


def _sized(value: Any) -> int | None:
    return len(value) if isinstance(value, Sized) else None


def _check_binop(operator: str, left: Any, right: Any) -> None:
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(n, int) and (size := _sized(seq)) is not None:
                _check_size("'*'", size * max(n, 0))
        if isinstance(left, int) and isinstance(right, int):
            bits = abs(left).bit_length() + abs(right).bit_length()
            if bits > MAX_INT_BITS:
                raise _too_big("'*' on integers", bits, MAX_INT_BITS)
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            bits = abs(left).bit_length() * right
            if bits > MAX_INT_BITS:
                raise _too_big("'**'", bits, MAX_INT_BITS)
    elif operator == "+":
        a, b = _sized(left), _sized(right)
        if a is not None and b is not None:
            _check_size("'+'", a + b)
    elif operator == "%" and isinstance(left, str):
        _check_printf(left)


def _check_method(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Pre-check a bound builtin method that can grow memory by its arguments."""
    owner = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", "")
    if isinstance(owner, str):
        if name in ("center", "ljust", "rjust", "zfill") and args and isinstance(args[0], int):
            _check_size(f"str.{name}", args[0])
        elif name == "expandtabs":
            tab = args[0] if args else kwargs.get("tabsize", 8)
            if isinstance(tab, int):
                _check_size("str.expandtabs", len(owner) + owner.count("\t") * max(tab, 0))
        elif name == "replace" and len(args) >= 2:
            _check_replace(owner, args[0], args[1], args[2] if len(args) > 2 else -1)
        elif name == "join" and args and (n := _sized(args[0])) is not None:
            items = args[0]
            total = len(owner) * n
            if isinstance(items, list | tuple):
                total += sum(len(x) for x in items if isinstance(x, str))
            _check_size("str.join", total)
    elif isinstance(owner, list | dict | set) and name in ("extend", "update"):
        added = sum(_sized(a) or 0 for a in args) + len(kwargs)
        _check_size(f"{type(owner).__name__}.{name}", len(owner) + added)
    elif isinstance(owner, list | set) and name in ("append", "add", "insert"):
        _check_size(f"{type(owner).__name__}.{name}", len(owner) + 1)


def _check_replace(s: Any, old: Any, new: Any, count: Any) -> None:
    s, old, new = str(s), str(old), str(new)
    hits = len(s) + 1 if not old else s.count(old)
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    _check_size("replace", len(s) + hits * len(new))


def _guard_filter(check: Callable[..., None], fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        check(*args, **kwargs)
        return fn(*args, **kwargs)

    return wrapper


def _f_center(value: Any, width: Any = 80, *_: Any, **__: Any) -> None:
    if isinstance(width, int):
        _check_size("center", width)


def _f_indent(s: Any, width: Any = 4, *_: Any, **__: Any) -> None:
    unit = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    lines = str(s).count("\n") + 1
    _check_size("indent", len(str(s)) + lines * max(unit, 0))


def _f_format(value: Any, *_: Any, **__: Any) -> None:
    _check_printf(str(value))


def _f_batch(value: Any, linecount: Any = 1, *_: Any, **__: Any) -> None:
    if isinstance(linecount, int):
        _check_size("batch", linecount)


def _f_replace(eval_ctx: Any, s: Any, old: Any = "", new: Any = "", count: Any = None,
               *_: Any, **__: Any) -> None:
    _check_replace(s, old, new, -1 if count is None else count)


def _f_join(eval_ctx: Any, value: Any, d: Any = "", *_: Any, **__: Any) -> None:
    if isinstance(value, list | tuple):
        sep = len(str(d)) * len(value)
        _check_size("join", sep + sum(len(x) for x in value if isinstance(x, str)))


_FILTER_CHECKS: dict[str, Callable[..., None]] = {
    "center": _f_center, "indent": _f_indent, "format": _f_format,
    "batch": _f_batch, "replace": _f_replace, "join": _f_join,
}


class _CodeGenerator(CodeGenerator):
    """Jinja's code generator with ``~`` routed through a size check."""

    def visit_Concat(self, node: Concat, frame: Frame) -> None:
        self.write("environment.checked_concat(")
        super().visit_Concat(node, frame)
        self.write(")")


class BudgetedSandbox(SandboxedEnvironment):
    """The sandbox plus the size checks of the module docstring."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _CodeGenerator

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.globals["range"] = _safe_range
        for name, check in _FILTER_CHECKS.items():
            # functools.wraps keeps Jinja's pass_eval_context marker (in __dict__)
            self.filters[name] = _guard_filter(check, self.filters[name])

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        if isinstance(obj, types.BuiltinMethodType):
            _check_method(obj, args, kwargs)
        return super().call(context, obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        fmt = str(value.__self__)

        def checked(*args: Any, **kwargs: Any) -> str:
            _check_format_string(fmt)
            return wrapper(*args, **kwargs)

        return checked

    @staticmethod
    def checked_concat(value: str) -> str:
        """The result of ``~`` (its parts are each bounded), refused over ``MAX_SIZE``."""
        _check_size("'~'", len(value))
        return value


_ENV = BudgetedSandbox(undefined=jinja2.StrictUndefined, autoescape=False)


class _Budget:
    """A trace function counting steps against ``MAX_STEPS`` and a deadline."""

    __slots__ = ("deadline", "steps")

    def __init__(self, seconds: float, steps: int) -> None:
        self.deadline = time.monotonic() + seconds
        self.steps = steps

    def _spend(self) -> None:
        self.steps -= 1
        if self.steps <= 0:
            raise BudgetExceeded(f"more than {MAX_STEPS} steps")
        if not self.steps % _DEADLINE_EVERY and time.monotonic() > self.deadline:
            raise BudgetExceeded(f"still running after {RENDER_SECONDS:g}s")

    def trace(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        self._spend()  # a 'call' event: counts against the steps too
        return self.local

    def local(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self._spend()
        return self.local


def context(monitor: Monitor, event: Event) -> dict[str, Any]:
    """Return the template context for ``event`` of ``monitor`` (keys: ``CONTEXT_NAMES``)."""
    return {
        "event": event.summary,
        "observation": event.observation,
        "signature": event.signature,
        "groups": list(event.groups),
        "monitor": {"name": str(monitor.name), "description": monitor.description},
        "firedAt": event.fired_at,
        "kind": event.kind,
        "previous": event.previous or "",
        "current": event.observation,
        "diff": event.diff,
        "meta": dict(event.meta),
    }


@functools.lru_cache(maxsize=512)
def _compile(text: str) -> jinja2.Template:
    return _ENV.from_string(templates.expand_short_form(text))


def _produce(text: str, ctx: dict[str, Any]) -> str:
    parts: list[str] = []
    size = 0
    for part in _compile(text).generate(ctx):
        size += len(part)
        if size > MAX_OUTPUT:
            raise errors.ActionError(
                f"template: output is over {MAX_OUTPUT} characters (max {MAX_OUTPUT})")
        parts.append(part)
    return "".join(parts)


def render(text: str, ctx: dict[str, Any], *, seconds: float = RENDER_SECONDS,
           steps: int = MAX_STEPS) -> str:
    """Render template ``text`` (long or short form) with ``ctx`` within the budgets.

    Safe to call from any thread (the trace function is per thread) and cheap for
    a normal template; at worst it takes ``seconds`` (default ``RENDER_SECONDS``).

    Raises:
        errors.ActionError: ``template: <what is wrong>`` for a syntax error, an
            undefined name, a sandbox violation, a budget breach (time, steps,
            size) or an output over ``MAX_OUTPUT`` characters.
    """
    budget = _Budget(seconds, steps)
    previous = sys.gettrace()
    sys.settrace(budget.trace)
    try:
        return _produce(text, ctx)
    except BudgetExceeded as e:
        raise errors.ActionError(
            f"template: render budget exceeded ({e}); simplify the template") from None
    except errors.ActionError:
        raise
    except jinja2.TemplateSyntaxError as e:
        raise errors.ActionError(f"template: line {e.lineno}: {e.message}") from e
    except jinja2.UndefinedError as e:
        raise errors.ActionError(f"template: {e.message}") from e
    except jinja2.exceptions.SecurityError as e:
        raise errors.ActionError(f"template: not allowed: {e}") from e
    except RecursionError as e:
        raise errors.ActionError("template: recursion too deep") from e
    except Exception as e:  # a filter raising on odd input: still a failed render
        raise errors.ActionError(f"template: {type(e).__name__}: {e}") from e
    finally:
        sys.settrace(previous)


def check(text: str) -> str | None:
    """Return what is statically wrong with template ``text``, or None.

    Finds syntax errors and names outside the context (``templates.CONTEXT_NAMES``);
    used by lint. Errors only visible with data (an attribute missing at render
    time, a budget breach) are left to ``render``.
    """
    try:
        ast = _ENV.parse(templates.expand_short_form(text))
    except jinja2.TemplateSyntaxError as e:
        return f"template syntax error at line {e.lineno}: {e.message}"
    unknown = sorted(meta.find_undeclared_variables(ast) - templates.CONTEXT_NAMES)
    if unknown:
        known = ", ".join(sorted(templates.CONTEXT_NAMES))
        return f"unknown template variable {', '.join(map(repr, unknown))} (known: {known})"
    return None
