"""Output checks: before any work, refuse an output the job could not publish.

Takes an output URL, whether it may be replaced and which names a previous run of the job writes;
gives nothing, or a one-line ``BpeDaskError``: the output already holds results (without
``--overwrite``), holds other files, or cannot be written (a probe file is written and removed
where the output will go). ``publish`` checks again at commit time: these checks only make a
doomed job fail before its work rather than after it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import fsspec

from bpe_dask.errors import BpeDaskError
from bpe_dask.io.publish import PROBE, SUCCESS, taken
from bpe_dask.io.storage import LOCAL, Store, describe, is_local


def check_output_dir(url: str, overwrite: bool, ours: Callable[[str], bool], store: Store = LOCAL) -> None:
    """Refuse an output directory that already holds results (unless ``overwrite``) or other files.

    ``ours`` says which file names a previous run of the same job writes.
    """
    fs, path = store.fs(url)
    try:
        exists = fs.exists(path)
        listed = fs.ls(path, detail=False) if exists else []
    except FileNotFoundError:  # gone between the two looks (in a store: another job's probe file)
        exists, listed = False, []
    except (OSError, ValueError) as error:
        raise BpeDaskError(f"cannot use output {url}: {describe(error)}") from None
    # Another job's check_writable may have a probe file in it for a moment: not a result.
    names = {e.rstrip("/").rsplit("/", 1)[-1] for e in listed}
    names = {name for name in names if not name.startswith(PROBE)}
    if exists and not fs.isdir(path):
        raise BpeDaskError(f"output {url} exists and is not a directory")
    foreign = sorted(name for name in names if not (ours(name) or name == SUCCESS))
    if foreign:
        raise BpeDaskError(
            f"output directory {url} holds other files ({foreign[0]}, ...); choose another out="
        )
    if names and not overwrite:
        raise taken(url)
    check_writable(url, store)


def check_output_file(url: str, overwrite: bool, store: Store = LOCAL) -> None:
    fs, path = store.fs(url)
    try:
        exists = fs.exists(path)
    except (OSError, ValueError) as error:
        raise BpeDaskError(f"cannot use output {url}: {describe(error)}") from None
    if exists and fs.isdir(path):
        raise BpeDaskError(f"output {url} is a directory; name a file for the counts")
    if exists and not overwrite:
        raise BpeDaskError(f"output {url} already exists; pass overwrite=True to replace it")
    check_writable(url, store, beside=True)


def check_writable(url: str, store: Store = LOCAL, beside: bool = False) -> None:
    """Write and delete a small file where ``url`` will be written (in it, or ``beside`` it), so a
    job learns before its work, not after, that it cannot publish. Folders made for the probe
    are removed again: a job that stops leaves nothing behind."""
    fs, path = store.fs(url)
    path = path.rstrip("/")
    # Locally a directory is published by renaming a sibling into place, so its parent must be
    # writable; an object store writes under the URL itself.
    folder = path.rpartition("/")[0] or "/" if beside or is_local(url) else path
    made = []
    try:
        for ancestor in missing_folders(fs, folder) if is_local(url) else []:
            fs.mkdir(ancestor)
            made.append(ancestor)
        probe = f"{folder}/{PROBE}{uuid.uuid4().hex}"
        fs.pipe_file(probe, b"")
        fs.rm_file(probe)
    except Exception as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else describe(error)
        raise BpeDaskError(f"cannot write the output {url}: {reason}") from None
    finally:
        for folder_made in reversed(made):
            fs.rmdir(folder_made)


def missing_folders(fs: fsspec.AbstractFileSystem, folder: str) -> list[str]:
    """``folder`` and its ancestors that do not exist yet, outermost first."""
    missing = []
    while folder not in ("", "/") and not fs.exists(folder):
        missing.append(folder)
        folder = folder.rpartition("/")[0]
    return missing[::-1]


def remove_files(urls: list[str], store: Store = LOCAL) -> None:
    """Delete intermediate files a job wrote (never a whole folder another job may share)."""
    for url in urls:
        fs, path = store.fs(url)
        if fs.exists(path):
            fs.rm_file(path)
