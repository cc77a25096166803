"""Writing results: paths checked before any work, files replaced atomically, nothing left behind.

A result is written into an unnamed file in the target's directory (Linux `O_TMPFILE`) and only
given a name once it is complete, so even a kill in the middle of the write leaves no file.
Where the file system has no unnamed files, a hidden temporary file is used and removed on
every failure that Python sees.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
from pathlib import Path

from ipuplan.errors import PlanError


def output_problem(path: Path, *, inputs: tuple[Path, ...] = (), force: bool = False, in_place: bool = False) -> str | None:
    """Why `path` cannot take a result, or None. Checked before any work, by really creating a file there."""
    if str(path) == "":
        return "the output path is empty"
    if path.is_dir():
        return "is a directory; give a file name"
    writes_an_input = any(path.exists() and path.resolve() == source.resolve() for source in inputs)
    if writes_an_input and not in_place:
        return "is the input plan; pass --in-place to overwrite it"
    if path.exists() and not (force or writes_an_input):
        return "already exists; pass --force to overwrite it"
    folder = path.parent
    if not folder.is_dir():
        return f"directory {folder} does not exist"
    return _unwritable(folder)


def _unwritable(folder: Path) -> str | None:
    probe = folder / f".ipuplan-probe-{secrets.token_hex(4)}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as error:
        return f"cannot write in directory {folder}: {error.strerror}"
    probe.unlink(missing_ok=True)
    return None


def require_writable(path: Path, *, inputs: tuple[Path, ...] = (), force: bool = False, in_place: bool = False) -> None:
    problem = output_problem(path, inputs=inputs, force=force, in_place=in_place)
    if problem is not None:
        raise PlanError(problem, source=str(path))


def write_atomically(path: str | Path, content: str | bytes) -> None:
    """Replace `path` with `content` (text is written as UTF-8) in one step; a failure or a kill leaves
    the old file as it was."""
    path = Path(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        _write_unnamed(path, data)
    except _NoUnnamedFiles:
        _write_named(path, data)


class _NoUnnamedFiles(Exception):
    """This file system (or this process) cannot create and then name an unnamed file."""


_UNSUPPORTED = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.EXDEV, errno.EPERM, errno.ENOENT, errno.EACCES)


def _write_unnamed(path: Path, data: bytes) -> None:
    try:
        descriptor = os.open(path.parent, getattr(os, "O_TMPFILE", 0) | os.O_WRONLY, 0o666)
    except OSError as error:
        if error.errno in _UNSUPPORTED or not hasattr(os, "O_TMPFILE"):
            raise _NoUnnamedFiles from None
        raise
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        _write_all(descriptor, data)
        _give_name(descriptor, temporary)  # the name comes only once the content is complete
    finally:
        os.close(descriptor)
    _rename_over(temporary, path)


def _give_name(descriptor: int, name: Path) -> None:
    try:
        os.link(f"/proc/self/fd/{descriptor}", name, follow_symlinks=True)
        return
    except OSError as error:
        if error.errno not in _UNSUPPORTED:
            raise
    # where /proc cannot link across mounts, linkat(AT_EMPTY_PATH) names the descriptor itself
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.linkat(descriptor, b"", _AT_FDCWD, os.fsencode(name), _AT_EMPTY_PATH) != 0:
        raise _NoUnnamedFiles


_AT_FDCWD, _AT_EMPTY_PATH = -100, 0x1000


def _write_named(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        _write_all(descriptor, data)
    except BaseException:
        os.close(descriptor)
        temporary.unlink(missing_ok=True)
        raise
    os.close(descriptor)
    _rename_over(temporary, path)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view):]
    os.fsync(descriptor)


def _rename_over(temporary: Path, path: Path) -> None:
    try:
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
