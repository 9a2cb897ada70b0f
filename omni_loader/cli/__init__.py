"""The ``omni-loader`` command line: the one layer that knows about argparse.

Each command module turns options into typed values and makes one call into the library, which never sees a
``Namespace``. This package owns the parser, the one-line error policy (:func:`main`) and which options were
typed (for ``--resume``: :func:`parse_args`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from .. import __version__
from ..errors import OmniLoaderError, one_line

# The command modules, in --help's order; each adds its subcommands through ``add_command(subparsers)``.
COMMAND_MODULES: tuple[str, ...] = ("doctor", "model", "reproduce", "report", "profile", "traversal", "serve", "timeline")


__all__ = ["build_parser", "main", "parse_args"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="omni-loader",
        description="Profile Qwen2.5-Omni Token2Wav loading with both buffer-discovery variants "
        "(baseline: one state_dict() per buffer; optimized: one module walk).",
        epilog="Start with `omni-loader reproduce` (synthetic full-size checkpoint, CPU) or `--help` on a command.",
    )
    parser.add_argument("--version", action="version", version=f"omni-loader {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help=f"print the full traceback of an error (also {DEBUG_ENV}=1); any place on the line")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").add_command(sub)
    return parser


# Commands that read saved files or source text only: they run whatever torch and transformers are installed.
READS_SAVED_FILES = ("doctor", "report", "compare", "pack", "timeline")


# Why a linked --out is refused: what the kit writes there would land in the link's target, outside the folder named.
OUT_IN_PLACE = ("omni-loader writes --out in place, never through a link; name the folder (or file) it points to, "
                "or remove the link, and run again")


def refuse_before_running(args: argparse.Namespace) -> None:
    """Every command's ``--out``, checked once before the command runs: a symbolic link (or a file of several
    names) is refused in one line; one check for all cannot be left out by a writer. Then a torch or transformers
    outside the kit's ranges (pyproject.toml), where the command runs them: a transformers that vLLM-Omni excludes
    builds another module tree, and the figures would not be the PR's."""
    from ..safe_files import refuse_link

    if getattr(args, "out", None):
        refuse_link(args.out, OUT_IN_PLACE)
    if getattr(args, "command", None) not in READS_SAVED_FILES and not getattr(args, "source", None):
        from ..host.requirements import problems

        bad = [p for p in problems(names=("torch", "transformers")) if p.have is not None]
        if bad:
            raise OmniLoaderError(bad[0].line())


# Libraries whose exceptions reach the user as one line (the file, what is wrong), not as a traceback.
ONE_LINE_MODULES = ("torch", "safetensors", "json", "pickle", "_pickle", "zipfile", "pandas", "csv")
DEBUG_ENV = "OMNI_LOADER_DEBUG"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed, defaults unwrapped and the typed options recorded in ``explicit`` (see
    :class:`~omni_loader.cli.options.Default`)."""
    from .options import take_defaults

    return take_defaults(build_parser().parse_args(list(argv)))


def _debug(argv: list[str]) -> tuple[bool, list[str]]:
    """``--debug`` anywhere before ``--`` (or OMNI_LOADER_DEBUG=1): tracebacks for errors."""
    head = argv[: argv.index("--")] if "--" in argv else argv
    flag = "--debug" in head
    if flag:
        argv = [a for i, a in enumerate(argv) if not (a == "--debug" and i < len(head))]
    env = os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")
    return flag or env, argv


def _innermost_package(exc: BaseException) -> str:
    """The top package of the innermost frame ``exc`` was raised in (``matplotlib``), or ''."""
    tb, last = exc.__traceback__, ""
    while tb is not None:
        last = tb.tb_frame.f_globals.get("__name__", "") or last
        tb = tb.tb_next
    return last.split(".")[0]


OUT_OF_MEMORY_ADVICE = ("the machine, or this process's memory limit, ran out; free memory (or lift the limit) and "
                        "run again")
# Made in advance, written with no allocation left to make: the last resort of main's out-of-memory handler.
OUT_OF_MEMORY_LINE = f"omni-loader: error: out of memory: {OUT_OF_MEMORY_ADVICE}\n".encode()


def _where(exc: BaseException) -> str:
    """`` in matplotlib``: where an out-of-memory error struck, for its one line."""
    package = _innermost_package(exc)
    return f" in {package}" if package else ""


def tolerate_narrow_terminals() -> None:
    """Let stdout and stderr write what their encoding cannot (``LC_ALL=C``: ASCII) as escapes (``\\u2014``),
    not a UnicodeEncodeError in the middle of a command: the kit's text holds Δ, ·, →, ≈ and —."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if not encoding.startswith("utf") and hasattr(stream, "reconfigure"):
            with suppress(ValueError, OSError, TypeError):  # a stream that cannot be reconfigured keeps its errors
                stream.reconfigure(errors="backslashreplace")


@contextmanager
def unraisable_memory_errors(debug: bool) -> Iterator[list[BaseException]]:
    """Hold back the ``MemoryError`` a native callback (matplotlib's FreeType) could not raise, so that a report drawn
    under a memory limit ends in one line; other unraisable errors, and all under ``--debug``, are printed."""
    held: list[BaseException] = []
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if debug or not issubclass(unraisable.exc_type, MemoryError):
            previous(unraisable)
        else:
            held.append(unraisable.exc_value)

    sys.unraisablehook = hook
    try:
        yield held
    finally:
        sys.unraisablehook = previous


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (``timeout``, a batch system, ``kill``) stops every command as Ctrl-C does, so that its finally
    clauses clean up; a child forked from this process that inherited the handler is ended by SIGTERM as before."""
    import signal

    owner = os.getpid()

    def on_term(signum: int, _frame: Any) -> None:
        if os.getpid() != owner:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread (a notebook's): signals are not this call's to take
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    tolerate_narrow_terminals()
    debug, argv = _debug(list(sys.argv[1:] if argv is None else argv))
    with unraisable_memory_errors(debug) as held, terminate_as_interrupt():
        try:
            code = _main(argv, debug)
        except MemoryError:
            # out of memory again while an error was being worded: the line made in advance
            if debug:
                raise
            os.write(2, OUT_OF_MEMORY_LINE)
            return 2
        if held and code == 0:  # the library went on without what it could not read: said, not hidden
            print(f"omni-loader: warning: memory ran out{_where(held[0])} where the library could not raise "
                  "it; what it drew may be incomplete: free memory and run again", file=sys.stderr)
        return code


def _main(argv: list[str], debug: bool) -> int:
    try:
        # an option's type= may raise OmniLoaderError, which argparse does not catch: said here in one line
        args = parse_args(argv)
        refuse_before_running(args)
        return int(args.func(args) or 0)
    except ModuleNotFoundError as exc:  # a dependency of the kit that is not installed: which, and how to install it
        from ..host.requirements import missing_module_line

        line = None if debug else missing_module_line(exc)
        if line is None:
            raise
        print(f"omni-loader: error: {line}", file=sys.stderr)
        return 2
    except OmniLoaderError as exc:
        if debug:
            traceback.print_exc()
        print(f"omni-loader: error: {one_line(str(exc), limit=2000, library=False)}", file=sys.stderr)
        return exc.exit_code
    except (MemoryError, ImportError) as exc:  # out of memory, wherever it struck: one line
        # (a shared library that cannot be mapped for want of memory is an ImportError: "failed to map segment")
        if debug or (isinstance(exc, ImportError) and "failed to map segment" not in str(exc)):
            raise
        try:
            print(f"omni-loader: error: out of memory{_where(exc)} ({str(exc) or type(exc).__name__}): "
                  f"{OUT_OF_MEMORY_ADVICE}", file=sys.stderr)
        except MemoryError:  # so little left that even naming where it struck failed: the line made in advance
            os.write(2, OUT_OF_MEMORY_LINE)
        return 2
    except SystemError as exc:  # native code returned failure without an exception (the kit's Python never does)
        if debug:
            raise
        print(f"omni-loader: error: a native library failed without saying why (SystemError: {one_line(str(exc))}); "
              "memory running out inside it can do this, as can a bug in it: free memory and run again, or run "
              "again with --debug (or OMNI_LOADER_DEBUG=1) for the traceback", file=sys.stderr)
        return 2
    except Exception as exc:  # a file torch, safetensors, json... could not read (or an OS error): one line
        if debug or not (isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in ONE_LINE_MODULES
                         or _innermost_package(exc) in ONE_LINE_MODULES):
            raise
        where = f" ({exc.filename})" if getattr(exc, "filename", None) and str(exc.filename) not in str(exc) else ""
        print(f"omni-loader: error: {type(exc).__name__}: {one_line(str(exc))}{where}; run again with --debug "
              "(or OMNI_LOADER_DEBUG=1) for the traceback", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("omni-loader: interrupted", file=sys.stderr)
        return 130
