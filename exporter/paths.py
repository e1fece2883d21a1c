"""Input paths as both commands check and show them.

``sglang-exporter --one-shot`` and ``sglang-exporter report`` read recorded log files; a path that
cannot be read must get the same one-line answer and the same exit status from both
(:data:`exporter.status.ExitStatus.USAGE`), so the check lives here, once.
"""

from __future__ import annotations

import errno
import os
import stat


def display_path(path: str) -> str:
    """``path`` (or any command-line text) as valid Unicode: bytes that are not UTF-8 as ``\\xNN``.

    Python decodes such bytes of file names and arguments to lone surrogates (``surrogateescape``);
    a lone surrogate is not valid UTF-8, so strict JSON parsers and UTF-8 writers reject it.
    """
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no undecodable byte produced
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


def directory_problem(path: str) -> str:
    """What both commands say of a directory given where a log file is expected."""
    return f"is a directory: give a file, or a glob such as '{display_path(path).rstrip('/')}/*.log'"


def file_problem(path: str) -> str | None:
    """Why ``path`` cannot be read as a log file, or ``None`` when it can.

    Returns one of ``"does not exist"``, ``"is a directory: give a file, or a glob such as
    '<path>/*.log'"`` (:func:`directory_problem`), ``"is not a regular file"`` or
    ``"cannot be read (<reason>)"`` (the operating system's reason, e.g. ``Permission denied``).
    The file is opened and closed to find out (as root, permission bits alone do not say). A FIFO or
    device is refused without being opened (opening a FIFO would wait for a writer). Never raises.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            return "does not exist"
        return f"cannot be read ({exc.strerror or exc})"
    except ValueError:  # an embedded NUL byte
        return "does not exist"
    if stat.S_ISDIR(st.st_mode):
        return directory_problem(path)
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    os.close(fd)
    return None


def not_regular(mode: int, path: str) -> str:
    """What a path that is not a regular file is, for the one warning that it is skipped."""
    if stat.S_ISDIR(mode):
        return directory_problem(path)
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    return f"is {kind}, not a regular file"
