"""Imported first by the kit's fork server (:data:`~omni_loader.bench.worker.PRELOAD`): a client that vanishes in
the middle of its fork request is skipped, not a traceback on the user's terminal.

Why: a Ctrl-C at the terminal reaches the benchmark while it may be handing the fork server a request (a connection,
then its file descriptors). The benchmark stops at once; the server, which ignores SIGINT, reads a request cut short,
and multiprocessing's ``reduction.recvfds`` raises ``EOFError``, which the server's loop does not catch: it died with
a traceback printed after the kit's one line (CI saw it once, ``test_ctrl_c_at_the_terminal_leaves_one_line...``).
The loop does skip a client whose connection was aborted (``OSError`` with ``ECONNABORTED``); a request cut short is
exactly that, so it is raised as one. Only the fork server imports this module (and a mutation run's conftest, which
imports PRELOAD in its own fork server): a client's ``recvfds`` would fail the same way either side of the change.
"""

from __future__ import annotations

import errno
import socket
from multiprocessing import reduction

_recvfds = reduction.recvfds


def recvfds(sock: socket.socket, size: int) -> list[int]:
    """``reduction.recvfds``, with a request cut short raised as an aborted connection."""
    try:
        return _recvfds(sock, size)
    except EOFError as e:
        raise ConnectionAbortedError(errno.ECONNABORTED, "fork request cut short: its client is gone") from e


if reduction.recvfds is not recvfds and getattr(reduction.recvfds, "__module__", "") != __name__:
    reduction.recvfds = recvfds
