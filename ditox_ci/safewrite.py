"""Writes that follow no link: the publish stage and the previous download run as root and hold
the token, in folders a process the optimizer under test left behind could still reach (it runs
as the workspace's owner). Such a process can swap `out/` for a link to `/etc` between two
writes; a write by path would follow it, and root would then write anywhere.

Every folder on the way is opened with `O_NOFOLLOW` from the one before it (from `/` or the
working directory), and files are created and replaced relative to the last descriptor: a link
anywhere on the path is an OSError (ELOOP or ENOTDIR), never followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ditox_ci.errors import InputError

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@contextlib.contextmanager
def folder(path: Path) -> Iterator[int]:
    """A descriptor of the folder `path`, created as needed, reached through no link when this
    process is root (an unprivileged write follows links like any other program's: only root's
    writes, publish's and the previous download's, can be turned against the machine)."""
    if os.geteuid() != 0:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            yield fd
        finally:
            os.close(fd)
        return
    fd = os.open("/" if path.is_absolute() else ".", _FOLDER)
    try:
        for part in path.parts[1:] if path.is_absolute() else path.parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            inner = os.open(part, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def new_file(folder_fd: int, prefix: str) -> Iterator[tuple[str, BinaryIO]]:
    """A file of a fresh random name in the folder, mode 0644: its name and its handle."""
    name = f".{prefix}.{secrets.token_hex(8)}"
    handle = os.open(name, _NEW_FILE, 0o644, dir_fd=folder_fd)
    os.fchmod(handle, 0o644)  # whatever the umask: what write_text would have made
    with os.fdopen(handle, "wb") as sink:
        yield name, sink


# why a write failed, in the one line it gets, by errno: a link on the way shows as ELOOP or
# ENOTDIR, a full disk (or a file size limit, or a quota) as ENOSPC, EFBIG or EDQUOT
_WRITE_FIXES = {
    errno.ELOOP: "ditox-ci writes through no link",
    errno.ENOTDIR: "ditox-ci writes through no link",
    errno.ENOSPC: "free some space and run again",
    errno.EFBIG: "free some space and run again",
    errno.EDQUOT: "free some space and run again",
}


def written_or_input_error(path: Path, exc: OSError) -> InputError:
    """The one line for a write that failed (exit 4: the folder does not take the file)."""
    fix = _WRITE_FIXES.get(exc.errno or 0, "choose a writable folder")
    return InputError(f"cannot write {path} ({exc.strerror or exc}); {fix}")


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """`path` holds the old bytes or the new ones, never half of them; a link planted at `path` is
    replaced, and a link on the way to it is an OSError."""
    with folder(path.parent) as fd:
        name = ""
        try:
            with new_file(fd, path.name) as (name, sink):
                sink.write(data)
                sink.flush()
                os.fsync(sink.fileno())
            os.replace(name, path.name, src_dir_fd=fd, dst_dir_fd=fd)
        except OSError:  # a full disk, say: nothing of the attempt is left behind
            if name:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fd)
            raise


# an existing file of the runner's (the step summary, the outputs file) as root appends to it: no
# link at its name is followed, and a FIFO planted there fails at once instead of blocking the job
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def append_bytes(path: Path, data: bytes) -> None:
    """Append `data` to the regular file `path` (created as needed), reached through no link as
    root (`folder`): the runner's file commands folder is the runner user's, whom the optimizer
    runs as, and the publish stage and the entrypoint append there as root. A link or anything but
    a regular file there is an OSError."""
    with folder(path.parent) as folder_fd:
        fd = os.open(path.name, _APPEND, 0o644, dir_fd=folder_fd)
    with os.fdopen(fd, "ab") as sink:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"not a regular file: {path}")
        sink.write(data)
