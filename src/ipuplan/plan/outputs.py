"""Writing results: paths checked before any work, files replaced atomically, nothing left behind.

Every output a run names (the plan, the report, the PNG, the model dump, explore's folder) is checked
before any work: writable, not an input, not one another. A result is written into an unnamed file in
the target's directory (Linux `O_TMPFILE`) and only given a name once it is complete, so even a kill in
the middle of the write leaves no file. Where the file system has no unnamed files, a hidden temporary
file is used and removed on every failure that Python sees. A write that fails (a full disk, a file
size limit) is an `OutputError` naming the file, exit 2.

A file replaced keeps its permission bits, and its owner and group where the process may set them (root; a
user may give it a group of theirs); a new file follows the umask. A file that may not be written is never
replaced: one with no write bit for anyone (0444) is refused even for root, whom the system would let write it
(a read-only file says "keep this"; `output_problem` says so before any work, `write_atomically` again at the
write). So is a directory with no write bit for anyone. An existing file that is not a regular file (`/dev/null`,
a FIFO, `/dev/stdout`) is written into, in place: replacing it would put a regular file where a device was.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import secrets
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ipuplan.errors import OutputError, PlanError

WRITING = threading.RLock()
"""Held while a result is written. The CLI's signal watcher takes it before it interrupts the main thread, so
an interrupt lands before a write or after it, never inside (a named temporary is never left behind)."""


def output_problem(path: Path, *, inputs: tuple[Path, ...] = (), force: bool = False, in_place: bool = False,
                   input_hint: str = "") -> str | None:
    """Why `path` cannot take a result, or None. Checked before any work, by really creating a file there.
    `in_place`: it may be an input (`input_hint` says how to ask for that when it is not allowed)."""
    if str(path) == "":
        return "the output path is empty"
    if path.is_dir():
        return "is a directory; give a file name"
    writes_an_input = any(same_file(path, source) for source in inputs)
    if writes_an_input and not in_place:
        return f"is an input of this run{input_hint}"
    existing = _existing(path)
    if existing is not None:
        refused = _refused(path, existing)
        if refused is not None:
            return f"cannot replace it: {refused}"
        if not (force or writes_an_input):
            return "already exists; pass --force to overwrite it"
        if not stat.S_ISREG(existing.st_mode):
            return None  # written into where it is (`write_atomically`): its directory is not written
    folder = path.parent
    if not folder.is_dir():
        return f"directory {folder} does not exist"
    return _unwritable(folder)


def _existing(path: Path) -> os.stat_result | None:
    """The status of the file `path` names (through symlinks), or None when there is none to replace."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _refused(path: Path, existing: os.stat_result) -> str | None:
    """Why the existing file `path` may not be written over, or None. By its mode bits first: no write bit for anyone
    is refused whoever runs (root, for whom `os.access` finds every file writable, included); then by `os.access`
    (another user's file, a read-only file system)."""
    mode = stat.S_IMODE(existing.st_mode)
    if not mode & 0o222:
        return f"it is read-only (mode {mode:04o})"
    if not os.access(path, os.W_OK):
        return f"no permission to write it (mode {mode:04o}, owner uid {existing.st_uid})"
    return None


def same_file(a: Path, b: Path) -> bool:
    """`a` and `b` name one file: the same path once resolved, or (both existing) the same inode, as a hard
    link or a bind mount gives."""
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except (OSError, RuntimeError):  # a symlink loop names nothing that could be the same
        return False


def _unwritable(folder: Path) -> str | None:
    """Why no file can be made in `folder`, or None: by its mode bits (no write bit for anyone: refused even for root,
    like a read-only file), then by really creating one."""
    try:
        mode = stat.S_IMODE(os.stat(folder).st_mode)
    except OSError as error:
        return f"cannot write in directory {folder}: {error.strerror}"
    if not mode & 0o222:
        return f"cannot write in directory {folder}: it is read-only (mode {mode:04o})"
    probe = folder / f".ipuplan-probe-{secrets.token_hex(4)}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as error:
        return f"cannot write in directory {folder}: {error.strerror}"
    probe.unlink(missing_ok=True)
    return None


def require_outputs(outputs: Mapping[str, Path | None], *, inputs: tuple[Path, ...], force: bool = False,
                    in_place: bool | None = None) -> None:
    """Every output of one run (option -> path; None: not asked for) can be written, none is an input (but `-o`
    with `in_place`; None: the command has no --in-place) and no two are one file; PlanError naming the file and
    the option."""
    named = {option: path for option, path in outputs.items() if path is not None}
    for option, path in named.items():
        plan = option == "-o" and in_place is not None
        problem = output_problem(path, inputs=inputs, force=force, in_place=bool(in_place) and plan,
                                 input_hint="; pass --in-place to overwrite the input plan" if plan else "")
        if problem is not None:
            raise PlanError(problem, location=option, source=str(path))
    options = list(named)
    for index, option in enumerate(options):
        for other in options[index + 1:]:
            if same_file(named[option], named[other]):
                raise PlanError(f"named by both {option} and {other}; each output needs a file of its own",
                                source=str(named[option]))


def require_output_folder(folder: Path, *, inputs: tuple[Path, ...]) -> None:
    """`folder` can hold a batch's results: a directory (made if missing, with its parents) that holds no input
    and is none; made here, before any work, so that a failure to make it costs nothing."""
    if str(folder) == "":
        raise PlanError("the output path is empty", source="-o")
    if folder.exists() and not folder.is_dir():
        raise PlanError("exists and is not a directory; give a directory for the results", source=str(folder))
    if any(same_file(folder, source) or same_file(folder, source.parent) for source in inputs):
        raise PlanError("must not be a directory of input plans: outputs would overwrite them", source=str(folder))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PlanError(f"cannot make the directory: {error.strerror}", source=str(folder)) from None
    problem = _unwritable(folder)
    if problem is not None:
        raise PlanError(problem, source=str(folder))


def write_atomically(path: str | Path, content: str | bytes) -> None:
    """Replace `path` with `content` (text is written as UTF-8) in one step; a failure or a kill leaves the old
    file as it was, and a failure is an OutputError naming `path`. The file replaced gives the new one its
    permission bits and (where the process may set them) its owner and group; one that may not be written (`_refused`:
    read-only, even for root) is an OutputError, and one that is not a regular file is written into, in place."""
    path = Path(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    with WRITING:
        try:
            existing = _existing(path)
            refused = None if existing is None else _refused(path, existing)
            if refused is not None:
                raise OutputError(path, refused)
            if existing is not None and not stat.S_ISREG(existing.st_mode):
                _write_into(path, data)
                return
            try:
                _write_unnamed(path, data, existing)
            except _NoUnnamedFiles:
                _write_named(path, data, existing)
        except OSError as error:
            raise OutputError(path, error.strerror or str(error)) from None


class _NoUnnamedFiles(Exception):
    """This file system (or this process) cannot create and then name an unnamed file."""


_UNSUPPORTED = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.EXDEV, errno.EPERM, errno.ENOENT, errno.EACCES)


def _write_unnamed(path: Path, data: bytes, existing: os.stat_result | None) -> None:
    try:
        descriptor = os.open(path.parent, getattr(os, "O_TMPFILE", 0) | os.O_WRONLY, 0o666)
    except OSError as error:
        if error.errno in _UNSUPPORTED or not hasattr(os, "O_TMPFILE"):
            raise _NoUnnamedFiles from None
        raise
    try:
        _take_over(descriptor, existing)
        _write_all(descriptor, data)
        if _give_name(descriptor, path, exists_ok=False):  # a new file gets its own name at once: no temporary
            return
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        _give_name(descriptor, temporary, exists_ok=True)  # the name comes only once the content is complete
    finally:
        os.close(descriptor)
    _rename_over(temporary, path)


def _give_name(descriptor: int, name: Path, *, exists_ok: bool) -> bool:
    """Link the unnamed file as `name`; False when `name` exists already (and `exists_ok`: the caller renames)."""
    try:
        os.link(f"/proc/self/fd/{descriptor}", name, follow_symlinks=True)
        return True
    except FileExistsError:
        if exists_ok:
            raise
        return False
    except OSError as error:
        if error.errno not in _UNSUPPORTED:
            raise
    # where /proc cannot link across mounts, linkat(AT_EMPTY_PATH) names the descriptor itself
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.linkat(descriptor, b"", _AT_FDCWD, os.fsencode(name), _AT_EMPTY_PATH) == 0:
        return True
    if ctypes.get_errno() == errno.EEXIST and not exists_ok:
        return False
    raise _NoUnnamedFiles


_AT_FDCWD, _AT_EMPTY_PATH = -100, 0x1000


def _write_named(path: Path, data: bytes, existing: os.stat_result | None) -> None:
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        _take_over(descriptor, existing)
        _write_all(descriptor, data)
    except BaseException:
        os.close(descriptor)
        temporary.unlink(missing_ok=True)
        raise
    os.close(descriptor)
    _rename_over(temporary, path)


def _take_over(descriptor: int, existing: os.stat_result | None) -> None:
    """Give the new file (still unnamed, or under its hidden name, and empty) the owner, group and permission bits of
    the file it replaces (`existing`; None: a new file, which keeps what the umask gave it). The owner first: a
    change of owner clears the set-id bits. A change of owner the process may not make is an error for root (it
    may make any), and for anyone else the group alone is tried (a group of theirs) and then left as it is."""
    if existing is None:
        return
    made = os.fstat(descriptor)
    if (made.st_uid, made.st_gid) != (existing.st_uid, existing.st_gid):
        try:
            os.fchown(descriptor, existing.st_uid, existing.st_gid)
        except PermissionError:
            if os.geteuid() == 0:
                raise
            try:
                os.fchown(descriptor, -1, existing.st_gid)
            except PermissionError:
                pass
    mode = stat.S_IMODE(existing.st_mode)
    if stat.S_IMODE(os.fstat(descriptor).st_mode) != mode:
        os.fchmod(descriptor, mode)


def _write_into(path: Path, data: bytes) -> None:
    """Write into the existing file `path` that is not a regular file (a device, a FIFO): nothing is made or renamed,
    and nothing is synced (a pipe or a device may not support it)."""
    descriptor = os.open(path, os.O_WRONLY)
    try:
        _write_all(descriptor, data, sync=False)
    finally:
        os.close(descriptor)


def _write_all(descriptor: int, data: bytes, *, sync: bool = True) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view):]
    if sync:
        os.fsync(descriptor)


def _rename_over(temporary: Path, path: Path) -> None:
    try:
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


class Capture:
    """What a library wrote to `path`: a link to an anonymous file in memory (Linux `memfd`), so nothing reaches
    a disk until the caller writes `content` with `write_atomically`."""

    def __init__(self, path: Path, descriptor: int) -> None:
        self.path = path
        self.descriptor = descriptor

    @property
    def content(self) -> bytes | None:
        """The bytes written (None: nothing was). OSError when the write stopped at the file size limit
        (`ulimit -f`), which a writer that keeps quiet about failures leaves as a truncated file."""
        size = os.fstat(self.descriptor).st_size
        if size == 0:
            return None
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit != resource.RLIM_INFINITY and size >= limit:
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))
        return os.pread(self.descriptor, size, 0)

    def discard(self) -> None:
        """Remove the link at once (the process is ending: the file in memory goes with it)."""
        shutil.rmtree(self.path.parent, ignore_errors=True)


@contextmanager
def captured_file(name: str) -> Iterator[Capture]:
    """A path named `name` (its suffix can matter to the writer) for a library that writes a file and does not
    say whether the write succeeded (OR-Tools' `export_to_file` leaves a truncated file on a full disk): the
    bytes go to memory, and the caller writes them with `write_atomically`, which does say so."""
    if not hasattr(os, "memfd_create"):
        raise PlanError("capturing a file needs Linux (memfd_create)", source=name)
    descriptor = os.memfd_create("ipuplan-capture")
    folder = Path(tempfile.mkdtemp(prefix="ipuplan-capture-"))
    try:
        (folder / name).symlink_to(f"/proc/{os.getpid()}/fd/{descriptor}")
        yield Capture(folder / name, descriptor)
    finally:
        os.close(descriptor)
        shutil.rmtree(folder, ignore_errors=True)
