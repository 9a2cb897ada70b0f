"""Flamegraphs of the Token2Wav load, drawn from py-spy's samples, for reading in a notebook.

py-spy samples the whole worker process, whose imports would dwarf the load, so :func:`build` keeps only the
stacks under :data:`ENTRY`, less the one-time model-code import (:data:`SKIP_UNDER_ENTRY`), and says how many
samples that left; a lazy import during the load is one ``(import)`` frame, and direct recursion is folded.
The icicle (hover for a frame's share, click to zoom) is written by :func:`svg` or shown by :class:`FlameView`.
"""

from __future__ import annotations

import json
import os
import textwrap
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any
from zlib import crc32

from ..errors import OmniLoaderError
from .sources import short_path
from ..safe_files import write_text

ENTRY = "load_token2wav"
SKIP_UNDER_ENTRY = ("import_model_code", "_modeling")
IMPORT = "(import)"  # one frame for Python's import machinery, wherever the load imports a module lazily
_IMPORT_FRAMES = ("_find_and_load", "_handle_fromlist", "_gcd_import", "import_module")
WIDTH = 1000  # viewBox units; the SVG scales to the width of its container
ROW = 18
HEADER = 74  # the title, two lines of note (what the picture shows, wrapped to the width) and the status line
LINE = 16  # a line of the header; a note longer than two lines adds one each
NOTE_LINES = 2
PAD = 4
CHAR = 6.6  # width of one 11-unit monospace character
NOTE_CHARS = int((WIDTH - 2 * PAD) // CHAR) - 2  # a line of the note that fits the drawing's width, with a margin
HINT = "Hover a frame for its share of the load; click a frame to zoom into it, the top frame to zoom out."
PACKAGES = (("omni_loader", 205), ("torch", 28), ("transformers", 275), ("safetensors", 120), ("", 0))


@dataclass
class Node:
    name: str
    file: str
    samples: int = 0
    seconds: float = 0.0
    children: dict[tuple[str, str], Node] = field(default_factory=dict)

    def child(self, name: str, file: str) -> Node:
        key = (name, file)
        if key not in self.children:
            self.children[key] = Node(name, file)
        return self.children[key]

    def depth(self) -> int:
        return 1 + max((c.depth() for c in self.children.values()), default=0)


@dataclass
class Flame:
    """The load's call tree with sample counts, and what was left out to get it."""

    root: Node
    samples_total: int  # every sample in the speedscope file
    samples_kept: int  # the samples under ENTRY, less those under SKIP_UNDER_ENTRY
    title: str = ""
    speedscope: Path | None = None
    caption: str = ""  # what the picture shows, where that is not the samples kept (the differential flamegraph)

    def note(self) -> str:
        """One sentence saying which samples the picture shows."""
        if self.caption:
            return self.caption
        share = self.samples_kept / self.samples_total if self.samples_total else 0.0
        return (f"{self.samples_kept:,} of {self.samples_total:,} samples ({share:.0%}): stacks under {ENTRY}() only, "
                f"without the one-time model-code import ({' / '.join(f'{s}()' for s in SKIP_UNDER_ENTRY)}); "
                "recursion and imports folded")


def load_stacks(speedscope: str | os.PathLike[str]) -> tuple[list[tuple[list[tuple[str, str]], float]], int]:
    """The samples under :data:`ENTRY` as ``([(name, file), ...] from the entry down, weight)``, less those under
    :data:`SKIP_UNDER_ENTRY`, recursion and imports folded; and how many samples the file holds."""
    try:
        data = json.loads(Path(speedscope).read_text())
        frames = [(str(f.get("name", "?")), str(f.get("file") or "")) for f in data["shared"]["frames"]]
        samples = [(list(s), float(w)) for prof in data["profiles"] for s, w in zip(prof["samples"], prof["weights"])]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise OmniLoaderError(f"cannot read speedscope file {speedscope}: {exc}") from None
    short = [name.split(".")[-1] for name, _ in frames]
    kept: list[tuple[list[tuple[str, str]], float]] = []
    for stack, weight in samples:
        starts = [i for i, f in enumerate(stack) if short[f] == ENTRY]
        if not starts or any(short[f] in SKIP_UNDER_ENTRY for f in stack[starts[-1] + 1:]):
            continue
        path = [frames[stack[starts[-1]]]]
        for f in stack[starts[-1] + 1:]:
            if short[f] in _IMPORT_FRAMES:  # the rest of the stack is the import itself
                path.append((IMPORT, ""))
                break
            if frames[f] != path[-1]:  # direct recursion: one frame
                path.append(frames[f])
        kept.append((path, weight))
    return kept, len(samples)


def build(speedscope: str | os.PathLike[str], title: str = "") -> Flame:
    """The call tree of the samples under :data:`ENTRY` (see the module doc), rooted at it."""
    stacks, total = load_stacks(speedscope)
    if not stacks:
        raise OmniLoaderError(f"no samples under {ENTRY}() in {speedscope}: nothing of the load was recorded")
    root = Node(*stacks[0][0][0])
    for path, weight in stacks:
        node = root
        node.samples += 1
        node.seconds += weight
        for name, file in path[1:]:
            node = node.child(name, file)
            node.samples += 1
            node.seconds += weight
    return Flame(root=root, samples_total=total, samples_kept=len(stacks), title=title, speedscope=Path(speedscope))


def _colour(node: Node) -> str:
    path = node.file.replace(os.sep, "/")
    hue = next(h for pkg, h in PACKAGES if not pkg or f"/{pkg}/" in path)
    grey = hue == 0
    jitter = crc32(node.name.encode()) % 24 - 12
    return f"hsl({(hue + jitter) % 360},{8 if grey else 62}%,{74 + jitter // 3}%)"


def _label(name: str, width: float) -> str:
    chars = int((width - 6) // CHAR)
    if chars < 3:
        return ""
    return name if len(name) <= chars else name[: chars - 1] + "…"


def svg_body(flame: Flame, element_id: str, *, colour: Callable[[Node], str] | None = None,
             tip: Callable[[Node], str] | None = None, hint: str | None = None) -> tuple[str, int]:
    """The ``<svg>`` element (no script) and its height; widths are ``node.samples`` over the root's.
    ``colour(node)``, ``tip(node)`` and ``hint`` replace the frame's fill, hover text and resting status line."""
    total = flame.root.samples or 1
    inner = WIDTH - 2 * PAD
    note = textwrap.wrap(flame.note(), NOTE_CHARS, break_on_hyphens=False) or [""]
    top = HEADER + LINE * max(0, len(note) - NOTE_LINES)
    out: list[str] = []
    rows = 0

    def draw(node: Node, x: float, depth: int) -> None:
        nonlocal rows
        w = node.samples / total
        if w * inner < 0.4:  # narrower than a line: not drawn (the script hides it alike)
            return
        rows = max(rows, depth + 1)
        y = top + depth * ROW
        where = "modules imported during the load" if node.name == IMPORT else (short_path(node.file) if node.file else "?")
        text = tip(node) if tip else (f"{node.name} ({where}): {node.samples / total:.1%} of the load's samples, "
                                      f"{node.seconds:,.2f} s")
        out.append(f'<g class="f" data-x="{x:.6f}" data-w="{w:.6f}" data-d="{depth}" data-n="{escape(node.name)}">'
                   f"<title>{escape(text)}</title>"
                   f'<rect x="{PAD + x * inner:.2f}" y="{y}" width="{w * inner:.2f}" height="{ROW - 1}" rx="2" '
                   f'fill="{(colour or _colour)(node)}"/>'
                   f'<text x="{PAD + x * inner + 3:.2f}" y="{y + ROW - 5}">{escape(_label(node.name, w * inner))}</text>'
                   "</g>")
        for child in sorted(node.children.values(), key=lambda c: -c.samples):
            draw(child, x, depth + 1)
            x += child.samples / total

    draw(flame.root, 0.0, 0)
    height = top + rows * ROW + PAD
    title = flame.title or f"{ENTRY}() flamegraph"
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" id="{element_id}" class="omni-flame" width="100%" '
            f'viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="11" style="max-width:{WIDTH}px">'
            '<style>.omni-flame g.f{cursor:pointer}.omni-flame g.f:hover rect{stroke:#333;stroke-width:0.8}'
            '.omni-flame text{pointer-events:none;fill:#111}</style>'
            f'<rect width="100%" height="100%" fill="#fcfcf8"/>'
            f'<text x="{PAD}" y="16" font-size="14" font-weight="bold">{escape(title)}</text>'
            + "".join(f'<text x="{PAD}" y="{32 + LINE * i}" fill="#555">{escape(line)}</text>'
                      for i, line in enumerate(note))
            + f'<text x="{PAD}" y="{top - 10}" fill="#135" class="status">{escape(hint or HINT)}</text>')
    return head + "".join(out) + "</svg>", height


# Zoom and status line. Works on the inline SVG (notebook output) and on the standalone file.
_SCRIPT = """
(function () {
  var svg = document.getElementById("%(id)s");
  if (!svg || svg.getAttribute("data-ready")) { return; }
  svg.setAttribute("data-ready", "1");
  var inner = %(inner)s, pad = %(pad)s, ch = %(char)s;
  var frames = Array.prototype.slice.call(svg.querySelectorAll("g.f"));
  var status = svg.querySelector("text.status"), idle = status.textContent;
  function label(name, w) {
    var n = Math.floor((w - 6) / ch);
    return n < 3 ? "" : (name.length <= n ? name : name.slice(0, n - 1) + "\\u2026");
  }
  function place(g, x, w) {
    var r = g.querySelector("rect"), t = g.querySelector("text");
    g.style.display = w * inner < 0.4 ? "none" : "";
    r.setAttribute("x", pad + x * inner); r.setAttribute("width", w * inner);
    t.setAttribute("x", pad + x * inner + 3); t.textContent = label(g.getAttribute("data-n"), w * inner);
  }
  function zoom(target) {
    var x0 = +target.getAttribute("data-x"), w0 = +target.getAttribute("data-w"), d0 = +target.getAttribute("data-d");
    frames.forEach(function (g) {
      var x = +g.getAttribute("data-x"), w = +g.getAttribute("data-w"), d = +g.getAttribute("data-d"), e = Math.pow(10, -9);
      if (d >= d0 && x >= x0 - e && x + w <= x0 + w0 + e) { place(g, (x - x0) / w0, w / w0); }
      else if (d < d0 && x <= x0 + e && x + w >= x0 + w0 - e) { place(g, 0, 1); }
      else { g.style.display = "none"; }
    });
  }
  svg.addEventListener("click", function (ev) {
    var g = ev.target.closest ? ev.target.closest("g.f") : null;
    if (g) { zoom(g); }
  });
  svg.addEventListener("mouseover", function (ev) {
    var g = ev.target.closest ? ev.target.closest("g.f") : null;
    status.textContent = g ? g.querySelector("title").textContent : idle;
  });
  svg.addEventListener("mouseleave", function () { status.textContent = idle; });
})();
"""


def script(element_id: str) -> str:
    return _SCRIPT % {"id": element_id, "inner": WIDTH - 2 * PAD, "pad": PAD, "char": CHAR}


def svg(flame: Flame, path: str | os.PathLike[str], **drawing: Any) -> Path:
    """Write the flamegraph as a standalone SVG file (``drawing``: :func:`svg_body`'s keywords)."""
    element_id = "flame-" + uuid.uuid4().hex[:8]
    body, _ = svg_body(flame, element_id, **drawing)
    code = script(element_id).replace("]]>", "]]]]><![CDATA[>")
    text = body[: -len("</svg>")] + f'<script type="text/javascript"><![CDATA[{code}]]></script></svg>\n'
    out = Path(path)
    write_text(out, '<?xml version="1.0" encoding="UTF-8"?>\n' + text)
    return out


def _href(path: Path, link_from: str | os.PathLike[str] | None) -> str:
    base = Path(link_from) if link_from is not None else Path.cwd()
    try:
        return Path(os.path.relpath(Path(path).resolve(), base.resolve())).as_posix()
    except ValueError:  # another drive (Windows)
        return Path(path).resolve().as_uri()


class FlameView:
    """A flamegraph shown inline in a notebook (HTML: the SVG, its script and the file links); ``link_from``
    is the directory JupyterLab resolves the links against (default: the kernel's working directory)."""

    FILES_NOTE = (" — the speedscope file holds every sample with its timeline: open it in speedscope "
                  "(speedscope.app, or <code>npx speedscope FILE</code>).")

    def __init__(self, flame: Flame, link_from: str | os.PathLike[str] | None = None,
                 files: dict[str, Path] | None = None, **drawing: Any) -> None:
        self.flame = flame
        self.drawing = drawing  # svg_body's colour, tip and hint
        self.link_from = link_from
        self.files = dict(files or {})
        if flame.speedscope is not None:
            self.files.setdefault("speedscope.json", flame.speedscope)

    def _repr_html_(self) -> str:
        element_id = "flame-" + uuid.uuid4().hex[:10]
        body, _ = svg_body(self.flame, element_id, **self.drawing)
        links = [f'<a href="{escape(_href(Path(path), self.link_from))}" download>{escape(label)}</a>'
                 for label, path in self.files.items() if path and Path(path).exists()]
        hint = ("<div style='font-size:90%;margin-top:2px'>Files: " + " · ".join(links) + self.FILES_NOTE + "</div>"
                if links else "")
        return f"<div>{body}{hint}</div><script>{script(element_id)}</script>"

    def __repr__(self) -> str:  # text/plain, where HTML is not shown
        return f"<flamegraph: {self.flame.title or ENTRY}; {self.flame.note()}>"
