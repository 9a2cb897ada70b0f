"""The one way the kit writes numbers for a person: notebook tables, report.md and plot labels.

Why one layer: the same figure (a phase's median, a share of the load, a byte count) appears in a
notebook table, in ``report.md`` and on a plot. Written three ways (``2.596139``, ``2.6e+03``,
``2596.139 ms``) it reads as three different numbers, and a reader has to guess the unit. The
rules here are few and the same everywhere:

* **times** are milliseconds below 10 s and seconds from there on (:func:`time_unit`, the PR's
  choice per row); in a table the unit is in the column name (``median (ms)``) and the cells hold
  plain numbers, so a column reads down without repeating it;
* **shares** are percentages (``71.9%``), never fractions;
* **counts and bytes** have thousands separators (``1,092``; ``1,834.6 MiB``);
* **numbers never switch to scientific notation** (no ``e+03``): a reader compares digits; a range is
  ``a … b`` (:func:`span`), never ``a–b`` or ``from a to b``;
* **names are never cut**: long ones (qualified module paths, ``file:line(function)``) wrap; in a
  table's ``code`` columns (a class, a rule, a buffer's path) a name never breaks inside (:func:`code_text`).

Tables are pandas Stylers (:func:`table`); text is plain functions (:func:`duration`, :func:`count`...); Markdown
tables have one writer (:func:`markdown_table`). This module imports nothing from the kit, so imports flow one way.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

SLOW_SECONDS = 10.0  # from here on a time reads better in seconds than in milliseconds
TIME_SCALE = {"s": 1.0, "ms": 1e3, "µs": 1e6, "ns": 1e9}
WRAP_WIDTH = "26em"  # widest a text cell grows before it wraps: keeps tables within a notebook page

_SECONDS_SUFFIX = re.compile(r"[ _]?(seconds|secs|s)$")


def _finite(x: Any) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def time_unit(seconds: float | Iterable[float]) -> str:
    """``'s'`` when the (largest) value is 10 s or more, else ``'ms'``: the PR's choice per row.

    The one rule for the unit of a time in the kit: a report row, a table column (pass all its
    values), a plot's axis (pass everything it draws) and a sentence all choose here, so the same
    figure never reads as milliseconds in one place and seconds in another. Missing and infinite
    values do not count.
    """
    values = list(seconds) if isinstance(seconds, Iterable) and not isinstance(seconds, str) else [seconds]
    finite = [abs(float(v)) for v in values if _finite(v)]
    return "s" if finite and max(finite) >= SLOW_SECONDS else "ms"


def format_seconds(seconds: float | None, unit: str | None = None) -> str:
    """``'1099.526 ms'``, ``'105.738 s'``: three decimals in ``unit`` (default by :func:`time_unit`),
    no thousands separators: the compact form of a time inside a longer cell or sentence."""
    return duration(seconds, unit).replace(",", "")


def duration(seconds: float | None, unit: str | None = None, digits: int = 3) -> str:
    """``'378.176 ms'``, ``'1,099.526 ms'``, ``'12.300 s'``: fixed decimals in ``unit`` (default by
    :func:`time_unit`), thousands separated. ``'n/a'`` for a missing value."""
    if not _finite(seconds):
        return "n/a"
    unit = unit or time_unit(float(seconds))
    return f"{float(seconds) * TIME_SCALE[unit]:,.{digits}f} {unit}"


def short_duration(seconds: float | None, unit: str | None = None) -> str:
    """Three significant digits in the unit that keeps the number between 1 and 1,000 (ns to ms),
    or seconds from 10 s on: ``'541 ns'``, ``'42.6 µs'``, ``'1.75 ms'``, ``'2,596 ms'``, ``'12.3 s'``.
    For plot labels and sentences, where a fixed number of decimals would be noise. ``unit='s'``: the
    parts of a whole said in seconds are too ("27.3 s: DiT 21.0 s, BigVGAN 6.36 s", not "6,362 ms")."""
    if not _finite(seconds):
        return "n/a"
    s = float(seconds)
    if (unit or time_unit(s)) == "s":
        return f"{number(s)} s"
    if s == 0 or abs(s) >= 1e-3:
        return f"{number(s * 1e3)} ms"
    if abs(s) >= 1e-6:
        return f"{number(s * 1e6)} µs"
    return f"{number(s * 1e9)} ns"


def number(x: float | None, significant: int = 3) -> str:
    """A plain number with about ``significant`` digits, never in scientific notation, thousands
    separated: ``2,596``, ``806``, ``1.51``, ``0.000541``; integers are shown whole."""
    if not _finite(x):
        return "n/a"
    x = float(x)
    if x == 0:
        return "0"
    if abs(x) >= 10 ** (significant - 1) or (x.is_integer() and abs(x) < 1e15):
        return f"{x:,.0f}"
    decimals = significant - 1 - math.floor(math.log10(abs(x)))
    return f"{x:,.{decimals}f}"


def percent(fraction: float | None, digits: int = 1) -> str:
    """A share written as a percentage: ``0.7198605`` -> ``'72.0%'``."""
    if not _finite(fraction):
        return "n/a"
    return f"{100 * float(fraction):,.{digits}f}%"


_percent_text = percent  # table() has a parameter of the same name


def count(n: float | None, noun: str = "", plural: str | None = None) -> str:
    """Thousands separated, with ``noun`` in the number it has: ``'1,092'``, ``'1 row'``, ``'1,092 runs'`` (the
    kit said "1 row(s) of runs.csv have", a form to fill, not a sentence)."""
    text = f"{round(float(n)):,}" if _finite(n) else "n/a"
    return f"{text} {noun if n == 1 else (plural or noun + 's')}" if noun else text


def mib(nbytes: float | None, digits: int = 1) -> str:
    """Bytes as MiB (2**20), thousands separated: ``1923743744`` -> ``'1,834.6 MiB'``."""
    if not _finite(nbytes):
        return "n/a"
    return f"{float(nbytes) / 2**20:,.{digits}f} MiB"


def times(ratio: float | None) -> str:
    """A ratio as 'so many times': ``203.4`` -> ``'203×'``, ``1.84`` -> ``'1.84×'``."""
    if ratio is None or (isinstance(ratio, float) and math.isnan(ratio)):
        return "n/a"
    if math.isinf(ratio):
        return "∞"
    return f"{number(ratio)}×"


def span(low: str, high: str) -> str:
    """A range as the kit writes it, ``99.9%\u00a0…\u00a0100.0%``; one value where both ends read the same."""
    return low if low == high else f"{low}\u00a0…\u00a0{high}"


def code(text: str) -> str:
    """Markdown inline code: keeps ``__setattr__`` from rendering as bold 'setattr'."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_table(rows: Sequence[Sequence[Any]], header: Sequence[str], right: Iterable[int] = ()) -> str:
    """A GitHub-flavoured Markdown table, the kit's only one (report.md, compare.md, profiles).

    Cells are written as given (format them first); a ``|`` is escaped and a line break becomes a
    space, since either would end the cell or the row. ``right`` lists the columns aligned right.
    """
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    right = set(right)
    lines = ["| " + " | ".join(map(cell, header)) + " |",
             "| " + " | ".join("---:" if i in right else "---" for i in range(len(header))) + " |"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- tables (pandas Styler)


def _general(x: Any) -> str:
    """A cell's number: integers whole, other numbers to four digits (numpy's scalars alike, without importing it)."""
    if x is None or isinstance(x, bool) or type(x).__name__ == "bool_":
        return "" if x is None else str(bool(x))
    if isinstance(x, numbers.Integral):
        return count(int(x))
    if isinstance(x, numbers.Real):
        x = float(x)
        return "" if math.isnan(x) else count(x) if x.is_integer() else number(x, 4)
    return str(x)


# after a separator, and after an underscore between two letters or digits (not inside __init__); never
# after a decimal point or a thousands separator (a dot or comma with a digit on both sides): "1,564.123 ms",
# "p=0.00794" and "ROCm 7.2.53211" stay whole
_BREAK_AFTER = re.compile(r"([/:(]|(?<!\d)[.,]|[.,](?!\d)|(?<=[A-Za-z0-9])_(?=[A-Za-z0-9]))")
_BREAK_AFTER_UNDERSCORE = re.compile(r"((?<=[A-Za-z0-9])_(?=[A-Za-z0-9]))")


def wrap_text(value: Any) -> str:
    """HTML for a text cell: escaped, with a break opportunity (``<wbr>``) after each ``.`` ``/``
    ``:`` ``(`` ``,`` and word-joining ``_`` (but not inside a number), so a qualified module path or ``file:line(function)`` wraps at its
    parts instead of being cut, or forcing the table wider than the page. Copying the text copies
    no invisible characters."""
    from html import escape

    return _BREAK_AFTER.sub(r"\1<wbr>", escape(plain_value(value), quote=False))


# in a function's name or file: after a dot or a slash only, so an identifier (qwen2_5_omni, __init__) stays whole
_BREAK_IN_NAME = re.compile(r"([./])")
NAME_WIDTH = "40em"  # widest a name-and-file cell grows before it breaks at a dot or slash


def name_and_file(value: Any) -> str:
    """HTML for a ``"name\\nfile"`` cell: the function's name on the first line, its file (and line) under it
    in a smaller grey, each breakable after a ``.`` or ``/`` only, never inside an identifier. A value without a
    line break is shown as one name."""
    from html import escape

    name, _, where = plain_value(value).partition("\n")

    def breakable(text: str) -> str:
        return _BREAK_IN_NAME.sub(r"\1<wbr>", escape(text, quote=False))

    below = (f'<br><span style="font-size: 0.85em; color: var(--jp-ui-font-color2, #616161)">{breakable(where)}</span>'
             if where else "")
    return breakable(name) + below


def _header_text(value: Any) -> str:
    """A column or index label: escaped; an identifier (``persistent_by_set``) breakable after its ``_``, a label in words
    at its spaces only, never inside a name it quotes nor after a range's dash (Lab broke "min–" over "max")."""
    from html import escape

    text = escape(str(value), quote=False)
    if " " not in text:
        return _BREAK_AFTER_UNDERSCORE.sub(r"\1<wbr>", text)
    return " ".join(f'<span style="{NOWRAP}">{w}</span>' if "–" in w else w for w in text.split(" "))


# in a cell of names: a break between items (", ", "; ") and after a dot before a letter (a qualified name's parts),
# never inside a name; in an item of words, the words that hold a "_" are the names
_ITEM_BREAKS = re.compile(r"(, |; )")
_DOT_BREAKS = re.compile(r"(\.(?=[A-Za-z_<]))")
_NAME_IN_WORDS = re.compile(r"[\w.]*_[\w.]*")
_NOT_A_NAME = re.compile(r"\(.*\)|\W*")  # "(none)", "—"
NOWRAP = "white-space: nowrap"


def _name_html(name: str) -> str:
    from html import escape

    parts = _DOT_BREAKS.split(name)
    return "<code>" + "".join(escape(p, quote=False) + "<wbr>" if i % 2 else
                              f'<span style="{NOWRAP}">{escape(p, quote=False)}</span>'
                              for i, p in enumerate(parts) if p) + "</code>"


def code_text(value: Any) -> str:
    """HTML for a cell of names (a class, a rule, a module path, a list ``Conv1d\u00a0×2, Linear\u00a0×1``): each
    name in ``<code>``, unbreakable (``white-space: nowrap``: never ``Qwen2_`` over ``5OmniSnakeBeta``), the cell
    breakable only between items and after a dot of a qualified name (``code2wav_dit_model.<wbr>rotary_embed``).
    An item in words (``_save_to_state_dict override``) keeps its words as text and its names (words with a ``_``)
    whole."""
    from html import escape

    html = []
    for i, item in enumerate(_ITEM_BREAKS.split(plain_value(value))):
        if i % 2 or _NOT_A_NAME.fullmatch(item):
            html.append(escape(item, quote=False))
        elif " " not in item:
            html.append(_name_html(item))
        else:
            end = 0
            for m in _NAME_IN_WORDS.finditer(item):
                html += [escape(item[end:m.start()], quote=False), _name_html(m.group())]
                end = m.end()
            html.append(escape(item[end:], quote=False))
    return "".join(html)


def table(df: Any, *, seconds: Iterable[str] = (), percent: Iterable[str] = (), mib: Iterable[str] = (),
          decimals: Mapping[str, int] | None = None, unit: str | None = None, index: bool = False,
          caption: str | None = None, names: Iterable[str] = (), code: Iterable[str] = ()):  # -> pandas Styler
    """``df`` as a table for people (a pandas Styler; the DataFrame itself is not changed).

    ``seconds`` columns are shown in one unit (``unit`` or :func:`time_unit` of their largest
    value) with the unit added to the column name; ``percent`` columns hold fractions and are shown
    as percentages; ``mib`` columns hold bytes and are shown in MiB; ``decimals`` fixes the decimals
    of other numeric columns. Every other number gets thousands separators and no scientific
    notation; text wraps at :data:`WRAP_WIDTH` instead of being cut. ``index=False`` hides an unnamed
    integer index (row positions, also after ``.tail()`` or a filter); a meaningful index, such as a
    phase name, is kept, and ``index=True`` keeps any. ``names`` columns hold ``"name\\nfile"`` text (a
    function and where it is) and are shown on two lines that break at dots and slashes only (:func:`name_and_file`).
    ``code`` columns (or the index, by its name) hold names (a class, a rule, a module path, lists of them), each shown
    whole in ``<code>`` (:func:`code_text`): an identifier never breaks at its ``_``. A negative number has a minus sign.
    """
    import pandas as pd

    frame = df.to_frame() if isinstance(df, pd.Series) else df.copy()
    if isinstance(frame.columns, pd.MultiIndex):
        raise ValueError("table() takes flat column names; join the levels first")
    frame.columns = [str(c) for c in frame.columns]
    seconds, percent, mib, names, code = [list(map(str, c)) for c in (seconds, percent, mib, names, code)]
    code_index = frame.index.name is not None and str(frame.index.name) in code
    code = [c for c in code if not (code_index and c == str(frame.index.name))]
    missing = [c for c in (*seconds, *percent, *mib, *(decimals or {}), *names, *code) if c not in frame.columns]
    if missing:
        raise KeyError(f"no column {missing[0]!r} in the table (has {', '.join(frame.columns)})")
    u = unit or time_unit(frame[seconds].to_numpy(dtype=float).ravel())
    for c in seconds:
        frame[c] = frame[c].astype(float) * TIME_SCALE[u]
    renamed = {c: f"{_SECONDS_SUFFIX.sub('', c) or 'time'} ({u})" for c in seconds}  # median_seconds: median (ms)
    mib_names = {c: c if "mib" in c.lower() else f"{c} (MiB)" for c in mib}
    frame = frame.rename(columns={**renamed, **mib_names})

    def blank_missing(text: Callable[[float], str]) -> Callable[[Any], str]:
        return lambda v: text(float(v)) if _finite(v) else ""

    formats: dict[str, Any] = {**dict.fromkeys(renamed.values(), blank_missing("{:,.3f}".format)),
                               **dict.fromkeys(percent, blank_missing(_percent_text)),
                               **dict.fromkeys(mib_names.values(), blank_missing(lambda v: f"{v / 2**20:,.1f}")),
                               **{c: blank_missing(f"{{:,.{d}f}}".format) for c, d in (decimals or {}).items()},
                               **dict.fromkeys(names, name_and_file), **dict.fromkeys(code, code_text)}
    numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c]) and frame[c].dtype != bool
               and c not in code]
    text = [c for c in frame.columns if c not in numeric and c not in names]
    for c in frame.columns:
        if c not in formats and _booleans(frame[c]):
            formats[c] = _yes_no
        formats.setdefault(c, _general if c in numeric else wrap_text)
    formats = {c: (lambda v, f=f: with_minus(f(v))) for c, f in formats.items()}
    styler = frame.style.format(formats).format_index(_header_text, axis="columns")
    # positions, not labels: a RangeIndex, or the integer labels that .tail() or a filter leaves behind
    positional = frame.index.name is None and pd.api.types.is_integer_dtype(frame.index)
    if not index and positional:
        styler = styler.hide(axis="index")
    else:
        styler = styler.format_index(code_text if code_index else wrap_text, axis="index")
    styler = styler.set_properties(subset=numeric, **{"text-align": "right", "white-space": "nowrap",
                                                      "font-variant-numeric": "tabular-nums"})
    styler = styler.set_properties(subset=text, **{"text-align": "left", "white-space": "normal",
                                                   "overflow-wrap": "break-word", "max-width": WRAP_WIDTH})
    styler = styler.set_properties(subset=names, **{"text-align": "left", "white-space": "normal",
                                                    "overflow-wrap": "normal", "max-width": NAME_WIDTH})
    styler = styler.set_properties(subset=code, **{"overflow-wrap": "normal"})  # breaks only where code_text offers
    styler = styler.set_table_styles([
        {"selector": "th", "props": [("text-align", "left"), ("white-space", "normal"), ("max-width", WRAP_WIDTH),
                                     ("overflow-wrap", "break-word")]},
        {"selector": "caption", "props": [("caption-side", "top"), ("text-align", "left"), ("font-weight", "bold")]},
    ], overwrite=False)
    if caption:
        styler = styler.set_caption(caption)
    return styler


# a table cell's negative sign: a minus (U+2212, as the kit's sentences write it), never in "stage-2" or a date
_HYPHEN_MINUS = re.compile(r"(?<![\w\-−])-(?=\d)")


def with_minus(text: str) -> str:
    """``text`` with each negative number's hyphen a minus (U+2212), as table cells write it; "stage-2" is kept."""
    return _HYPHEN_MINUS.sub("−", text)


def plain_value(value: Any) -> str:
    """A value as a reader wants it in a cell: no dict or list reprs, no 'None'."""
    if value is None or (isinstance(value, str) and not value):
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {plain_value(v)}" for k, v in value.items()) or "—"
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return str(value)  # a shape: (1, 1, 12)
    if isinstance(value, (list, tuple, set)):
        return ", ".join(plain_value(v) for v in value) or "—"
    return _general(value)


def _booleans(column: Any) -> bool:
    """A column of truth values (missing ones allowed): shown as yes/no (:func:`_yes_no`), not ``True``/``False``."""
    values = [v for v in column if _yes_no(v)]
    return bool(values) and all(type(v).__name__ in ("bool", "bool_") for v in values)


def _yes_no(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else "yes" if value else "no"

