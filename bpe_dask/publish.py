"""Publishing: files and directories that appear whole or not at all, and checks on outputs.

Takes an output URL and what to write; gives files written under a hidden temporary name and
moved into place, and directories published whole: locally a staging directory renamed into
place, in an object store (which has no rename) the old contents removed first and ``_SUCCESS``
written last. ``check_output_dir`` and ``check_output_file`` refuse an output before any work.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import fsspec

from .errors import BpeDaskError
from .storage import describe, filesystem, is_local

SUCCESS = "_SUCCESS"  # written last: its presence says the directory is complete


@contextmanager
def atomic_file(
    url: str, storage_options: dict | None = None
) -> Iterator[tuple[fsspec.AbstractFileSystem, str]]:
    """A hidden temporary path beside ``url`` to write, moved to ``url`` if the block succeeds."""
    fs, path = filesystem(url, storage_options)
    parent, _, name = path.rpartition("/")
    fs.makedirs(parent, exist_ok=True)
    partial = f"{parent}/.partial-{uuid.uuid4().hex}-{name}"
    try:
        yield fs, partial
        fs.mv(partial, path)
    except BaseException:
        if fs.exists(partial):
            fs.rm_file(partial)
        raise


def write_bytes_atomically(data: bytes, url: str, storage_options: dict | None = None) -> None:
    with atomic_file(url, storage_options) as (fs, partial):
        fs.pipe_file(partial, data)


def publish_directory(url: str, files: Mapping[str, str], storage_options: dict | None = None) -> None:
    """Make ``url`` a directory holding exactly ``files`` plus ``_SUCCESS``, never half of them."""
    with staged_directory(url, storage_options) as staging:
        fs, path = filesystem(staging, storage_options)
        for filename, text in files.items():
            fs.pipe_file(f"{path}/{filename}", text.encode("utf-8"))


@contextmanager
def staged_directory(url: str, storage_options: dict | None = None) -> Iterator[str]:
    """A directory to fill (by this process or by workers) that becomes ``url`` whole.

    When the block ends without an error, ``url`` holds what was written plus ``_SUCCESS``,
    and whatever it held before is gone. Locally the directory is a hidden sibling, renamed
    into place, so ``url`` is never seen half-written and survives a failure. Object stores
    have no rename: the old contents are removed first, files go straight to ``url``, and
    ``_SUCCESS`` comes last, so readers that wait for it never see a mix.
    """
    fs, path = filesystem(url, storage_options)
    path = path.rstrip("/")
    if is_local(url):
        parent, _, name = path.rpartition("/")
        tag = uuid.uuid4().hex[:12]
        staging, retired = f"{parent}/.{name}.partial-{tag}", f"{parent}/.{name}.old-{tag}"
        fs.makedirs(staging)
        try:
            yield staging
            fs.pipe_file(f"{staging}/{SUCCESS}", b"")
            _swap_into_place(fs, staging, path, retired)
        finally:
            if fs.exists(staging):
                fs.rm(staging, recursive=True)
    else:
        if fs.exists(path):
            fs.rm(path, recursive=True)
        yield url.rstrip("/")
        fs.pipe_file(f"{path}/{SUCCESS}", b"")
        fs.invalidate_cache(path)


def _swap_into_place(fs: fsspec.AbstractFileSystem, staging: str, path: str, retired: str) -> None:
    had_previous = fs.exists(path)
    if had_previous:
        fs.mv(path, retired, recursive=True)
    try:
        fs.mv(staging, path, recursive=True)
    except BaseException:
        if had_previous:
            fs.mv(retired, path, recursive=True)  # put the previous results back
        raise
    if had_previous:
        fs.rm(retired, recursive=True)


def check_output_dir(
    url: str, overwrite: bool, ours: Callable[[str], bool], storage_options: dict | None = None
) -> None:
    """Refuse an output directory that already holds results (unless ``overwrite``) or other files.

    ``ours`` says which file names a previous run of the same job writes.
    """
    fs, path = filesystem(url, storage_options)
    try:
        exists = fs.exists(path)
        names = {e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(path, detail=False)} if exists else set()
    except (OSError, ValueError) as error:
        raise BpeDaskError(f"cannot use output {url}: {describe(error)}") from None
    if exists and not fs.isdir(path):
        raise BpeDaskError(f"output {url} exists and is not a directory")
    foreign = sorted(name for name in names if not (ours(name) or name == SUCCESS))
    if foreign:
        raise BpeDaskError(
            f"output directory {url} holds other files ({foreign[0]}, ...); choose another --out"
        )
    if names and not overwrite:
        raise BpeDaskError(f"output directory {url} already holds results; pass --overwrite to replace them")
    check_writable(url, storage_options)


def check_output_file(url: str, overwrite: bool, storage_options: dict | None = None) -> None:
    fs, path = filesystem(url, storage_options)
    try:
        exists = fs.exists(path)
    except (OSError, ValueError) as error:
        raise BpeDaskError(f"cannot use output {url}: {describe(error)}") from None
    if exists and fs.isdir(path):
        raise BpeDaskError(f"output {url} is a directory; name a file for the counts")
    if exists and not overwrite:
        raise BpeDaskError(f"output {url} already exists; pass --overwrite to replace it")
    check_writable(url, storage_options, beside=True)


def check_writable(url: str, storage_options: dict | None = None, beside: bool = False) -> None:
    """Write and delete a small file where ``url`` will be written (in it, or ``beside`` it), so a
    job learns before its work, not after, that it cannot publish. Folders made for the probe
    are removed again: a job that stops leaves nothing behind."""
    fs, path = filesystem(url, storage_options)
    path = path.rstrip("/")
    # Locally a directory is published by renaming a sibling into place, so its parent must be
    # writable; an object store writes under the URL itself.
    folder = path.rpartition("/")[0] or "/" if beside or is_local(url) else path
    made = []
    try:
        for ancestor in _missing_folders(fs, folder) if is_local(url) else []:
            fs.mkdir(ancestor)
            made.append(ancestor)
        probe = f"{folder}/.bpe-dask-probe-{uuid.uuid4().hex}"
        fs.pipe_file(probe, b"")
        fs.rm_file(probe)
    except Exception as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else describe(error)
        raise BpeDaskError(f"cannot write the output {url}: {reason}") from None
    finally:
        for folder_made in reversed(made):
            fs.rmdir(folder_made)


def _missing_folders(fs: fsspec.AbstractFileSystem, folder: str) -> list[str]:
    """``folder`` and its ancestors that do not exist yet, outermost first."""
    missing = []
    while folder not in ("", "/") and not fs.exists(folder):
        missing.append(folder)
        folder = folder.rpartition("/")[0]
    return missing[::-1]


def remove_files(urls: list[str], storage_options: dict | None = None) -> None:
    """Delete intermediate files a job wrote (never a whole folder another job may share)."""
    for url in urls:
        fs, path = filesystem(url, storage_options)
        if fs.exists(path):
            fs.rm_file(path)
