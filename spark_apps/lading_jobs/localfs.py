"""Local paths under a root, opened one component at a time, following no symbolic link below the root.

``open("/data/team-a/in/x.csv")`` follows every link on the way: a tenant who plants
``in -> /data/team-b`` (or ``x.csv -> /proc/1/environ``) under its ``file://`` prefix
reads what is not its own, and writes and deletes there too. So a :class:`Place` is a
root (the cluster admin's prefix, opened as named) and the components below it; each
component is opened relative to the one before (``openat``) with ``O_NOFOLLOW``
(directories also ``O_DIRECTORY``), files are created ``O_EXCL``, renames, links, stats
and unlinks take the directory's descriptor and never follow the last component. A link
below the root is refused (:class:`LinkRefused`); a listing (:func:`walk`) skips it.

``follow=True`` (``lading run`` on a laptop, no prefix configured) opens the same way
but lets the kernel follow links, as ``open(2)`` does: there is no boundary to keep.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class LinkRefused(OSError):
    """A component below the root is a symbolic link (or not what it must be): not followed."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.ELOOP, f"{path} is a symbolic link; under a file:// prefix lading follows "
                                      "none (a link could lead out of the prefix)")


@dataclass(frozen=True)
class Place:
    """A path as a root directory and the components below it."""

    root: str
    parts: tuple[str, ...] = ()
    follow: bool = False

    @property
    def path(self) -> str:
        return "/".join((self.root.rstrip("/"), *self.parts)) or "/"

    @property
    def name(self) -> str:
        return self.parts[-1]

    def parent(self) -> Place:
        return Place(self.root, self.parts[:-1], self.follow)

    def child(self, *names: str) -> Place:
        return Place(self.root, (*self.parts, *names), self.follow)

    @property
    def nofollow(self) -> int:
        return 0 if self.follow else os.O_NOFOLLOW


def _refuse_if_link(name: str, dir_fd: int, path: str, error: OSError) -> None:
    """Turn an open's ``ELOOP``/``ENOTDIR`` on a link into :class:`LinkRefused`."""
    if error.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return
    try:
        link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return
    if link:
        raise LinkRefused(path) from error


def _step(fd: int, name: str, place: Place, path: str, create: bool) -> int:
    """The directory ``name`` inside ``fd``, opened (and made first with ``create``)."""
    for attempt in range(2):
        try:
            return os.open(name, _DIR | place.nofollow, dir_fd=fd)
        except FileNotFoundError:
            if not create or attempt:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=fd)
        except OSError as e:
            if not place.follow:
                _refuse_if_link(name, fd, path, e)
            raise
    raise FileNotFoundError(errno.ENOENT, "no such directory", path)  # pragma: no cover - loop returns


def open_dir(place: Place, create: bool = False) -> int:
    """A descriptor of the directory ``place`` (made, with its parents, when ``create``)."""
    if create and not os.path.isdir(place.root):
        os.makedirs(place.root, exist_ok=True)
    fd = os.open(place.root, _DIR)  # the root is the admin's: opened as named
    try:
        walked = place.root.rstrip("/")
        for name in place.parts:
            walked += "/" + name
            new = _step(fd, name, place, walked, create)
            os.close(fd)
            fd = new
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def directory(place: Place, create: bool = False) -> Iterator[int]:
    fd = open_dir(place, create)
    try:
        yield fd
    finally:
        os.close(fd)


def open_file(place: Place, flags: int, mode: int = 0o644, create_dirs: bool = False) -> int:
    """``place`` opened with ``flags`` relative to its directory, never through a link; a file read
    must be a regular file (a planted FIFO or device is refused, not waited on)."""
    with directory(place.parent(), create_dirs) as parent:
        try:
            fd = os.open(place.name, flags | place.nofollow | os.O_CLOEXEC | os.O_NONBLOCK, mode, dir_fd=parent)
        except OSError as e:
            if not place.follow:
                _refuse_if_link(place.name, parent, place.path, e)
            raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, "not a regular file", place.path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def lstat(place: Place) -> os.stat_result:
    """``place``'s status; its last component is not followed (unless ``follow``)."""
    with directory(place.parent()) as parent:
        return os.stat(place.name, dir_fd=parent, follow_symlinks=place.follow)


def walk(place: Place) -> Iterator[tuple[tuple[str, ...], os.DirEntry[str], int]]:
    """Every entry below ``place`` as (components below ``place`` of its directory, entry, that
    directory's descriptor, valid while the entry is handled). Links to directories are never
    descended (with ``follow`` neither, as ``os.walk``); the caller decides about the rest."""
    try:
        fd = open_dir(place)
    except (FileNotFoundError, NotADirectoryError):
        return
    yield from _walk(fd, (), place)


def _walk(fd: int, below: tuple[str, ...], place: Place) -> Iterator[tuple[tuple[str, ...], os.DirEntry[str], int]]:
    try:
        with os.scandir(fd) as entries:
            listed = sorted(entries, key=lambda e: e.name)
        for entry in listed:
            yield below, entry, fd
            if entry.is_dir(follow_symlinks=False):
                try:
                    sub = os.open(entry.name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
                except (FileNotFoundError, NotADirectoryError, OSError):
                    continue  # gone since the listing, or replaced by a link: not descended
                yield from _walk(sub, (*below, entry.name), place)
    finally:
        os.close(fd)


def fsync_dir(fd: int) -> None:
    """Make a rename or link in the directory ``fd`` durable (some file systems refuse: the rename is
    still atomic)."""
    with contextlib.suppress(OSError):
        os.fsync(fd)
