"""Reading and writing files that someone else may have planted: checkpoints, exported policies (and
anything else loaded from a directory the caller does not control).

    data = read_regular_file(path, max_bytes=16 << 20, what="policy")   # bytes, or FileCheckError
    replace_file(path, data)                                             # never through a link

A read refuses a symlink, a FIFO, a device or a directory before opening anything (a FIFO would
block forever, ``/dev/zero`` would fill memory) and a file larger than ``max_bytes`` before reading
it. A write goes to a new file beside the target and is renamed over it: a link planted at the
target is replaced, never followed.
"""

from __future__ import annotations

import os
import stat
import tempfile


class FileCheckError(ValueError):
    """A file that is not what a reader may open: one line naming the file and why.

    Attributes:
        path: the file.
        reason: why it is refused, in a few words (the message is ``"<path>: <reason>"``).
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def read_regular_file(path: str, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of the regular file ``path`` (not a link), at most ``max_bytes`` of them.

    Raises:
        FileCheckError: ``path`` is missing, a link, not a regular file, larger than ``max_bytes``,
            or cannot be read.
    """
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise FileCheckError(path, f"cannot read the {what} ({exc.strerror or exc})") from None
    if stat.S_ISLNK(info.st_mode):
        raise FileCheckError(path, f"a symbolic link; the {what} must be a regular file")
    if not stat.S_ISREG(info.st_mode):
        raise FileCheckError(path, f"not a regular file ({_kind(info.st_mode)}); the {what} must be one")
    if info.st_size > max_bytes:
        raise FileCheckError(path, f"{info.st_size} bytes, more than the {max_bytes} a {what} may hold")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise FileCheckError(path, f"cannot read the {what} ({exc.strerror or exc})") from None
    try:
        opened = os.fstat(fd)  # the file opened is the one checked (not swapped in between)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            raise FileCheckError(path, f"changed while it was opened; the {what} must be a regular file")
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise FileCheckError(path, f"cannot read the {what} ({exc.strerror or exc})") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > max_bytes:
        raise FileCheckError(path, f"grew past the {max_bytes} bytes a {what} may hold while it was read")
    return data


def replace_file(path: str, data: bytes) -> None:
    """Write ``data`` as the file ``path``: to a new file in the same directory, then renamed over
    ``path`` (a link planted at ``path`` is replaced, the file it points to left alone).

    Raises:
        OSError: the directory cannot be written.
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a special file"
