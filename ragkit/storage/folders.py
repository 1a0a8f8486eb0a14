"""Where a results folder's files live: a local folder, or a prefix on S3-compatible object storage
(``s3://bucket/prefix``), so every machine of a cluster reads and writes the same results.

A file is written whole or not at all on both: locally by a temporary file renamed over the
target (``ragkit.storage.atomic``), on object storage by one PUT (an object is never visible half
written). Reads go through pyarrow's filesystems, so a Parquet dataset is read the same way from
either. The S3 endpoint, region and credentials come from the standard AWS variables
(``AWS_ENDPOINT_URL`` for MinIO, Ceph or a local test server, ``AWS_ACCESS_KEY_ID``, ...).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragkit.errors import ConfigError

REMOTE_SCHEMES = ("s3://",)


def is_remote(location: str | Path) -> bool:
    return isinstance(location, str) and location.startswith(REMOTE_SCHEMES)


def as_location(location: str | Path) -> str | Path:
    """``location`` as a results root: an ``s3://`` URI stays a string, anything else is a Path."""
    return location if is_remote(location) else Path(location)


def location_name(location: str | Path) -> str:
    """The last part of a results location: its folder name, or the last part of its prefix."""
    return str(location).rstrip("/").rsplit("/", 1)[-1] if is_remote(location) else Path(location).resolve().name


@dataclass(frozen=True)
class Entry:
    """A file in a folder: its name without the suffix, its path for ``filesystem``, its mtime, and
    a tag that changes whenever its content does (size and mtime in ns locally, the ETag on S3),
    and its size in bytes (-1 when not known)."""

    stem: str
    path: str
    mtime: float
    tag: str = ""
    size: int = -1


class LocalFolder:
    # What reading a file that was removed raises, besides FileNotFoundError.
    missing_errors: tuple[type[Exception], ...] = ()

    def __init__(self, root: Path) -> None:
        import pyarrow.fs as pafs

        self.root = Path(root)
        self.filesystem: Any = pafs.LocalFileSystem()

    def path(self, relative: str) -> str:
        return str(self.root / relative)

    def write_bytes(self, relative: str, data: bytes) -> None:
        from ragkit.storage.atomic import write_bytes_atomic  # pandas comes with it: not at CLI start

        write_bytes_atomic(self.root / relative, data)

    def read_bytes(self, relative: str) -> bytes:
        return (self.root / relative).read_bytes()

    def exists(self, relative: str) -> bool:
        return (self.root / relative).exists()

    def delete(self, relative: str) -> None:
        (self.root / relative).unlink(missing_ok=True)

    def move(self, relative: str, target: str) -> None:
        """Rename a file within the folder (one rename: it is at one name or the other)."""
        from ragkit.storage.atomic import fsync_dir, make_dirs

        destination = self.root / target
        make_dirs(destination.parent)
        os.replace(self.root / relative, destination)
        fsync_dir(destination.parent)
        fsync_dir((self.root / relative).parent)

    def names(self, folder: str = "") -> list[str]:
        """Every name directly in ``folder`` (files and folders, hidden ones too), sorted."""
        try:
            return sorted(os.listdir(self.root / folder))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list(self, folder: str, suffix: str) -> list[Entry]:
        """The files of ``folder`` ending in ``suffix``, sorted by name; temporary files skipped."""
        entries = []
        try:
            # os.scandir, not Path.glob: a page lists a thousand markers several times, and
            # pathlib's objects took half of each listing.
            with os.scandir(self.root / folder) as found:
                for item in found:
                    # Hidden names are skipped, as Path.glob skipped them (another tool's temporaries).
                    if item.name.startswith(".") or not item.name.endswith(suffix):
                        continue
                    try:
                        stat = item.stat()
                    except FileNotFoundError:  # replaced or removed while listing
                        continue
                    entries.append(Entry(item.name[: -len(suffix)], item.path, stat.st_mtime,
                                         f"{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ino}", stat.st_size))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(entries, key=lambda entry: entry.stem)


class ObjectFolder:
    """A prefix in an S3-compatible bucket. Writes are single PUTs with boto3 (pyarrow's S3 writer
    uploads in parts, which some S3-compatible servers do not complete); reads are pyarrow's."""

    missing_errors: tuple[type[Exception], ...]

    def __init__(self, uri: str) -> None:
        try:
            import boto3
        except ImportError:
            raise ConfigError(f"results on object storage ({uri}) need boto3: pip install 'ragkit[s3]'") from None
        import pyarrow.fs as pafs

        bucket, _, prefix = uri[len("s3://"):].partition("/")
        if not bucket:
            raise ConfigError(f"'{uri}' names no bucket: use s3://BUCKET/PREFIX")
        self.uri = uri.rstrip("/")
        self.bucket, self.prefix = bucket, prefix.strip("/")
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        self._client = boto3.client("s3", endpoint_url=endpoint, region_name=region)
        self.missing_errors = (self._client.exceptions.NoSuchKey,)
        options: dict[str, Any] = {"region": region}
        if endpoint:
            scheme, _, host = endpoint.partition("://")
            options.update(endpoint_override=host or endpoint, scheme=scheme if host else "https")
        self.filesystem = pafs.S3FileSystem(**options)

    def _key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def path(self, relative: str) -> str:
        return f"{self.bucket}/{self._key(relative)}"

    def write_bytes(self, relative: str, data: bytes) -> None:
        self._client.put_object(Bucket=self.bucket, Key=self._key(relative), Body=data)

    def read_bytes(self, relative: str) -> bytes:
        return self._client.get_object(Bucket=self.bucket, Key=self._key(relative))["Body"].read()

    def upload_file(self, relative: str, path: Path) -> None:
        """A local file of any size (boto3 uploads a large one in parts; the object appears whole)."""
        self._client.upload_file(str(path), self.bucket, self._key(relative))

    def download_file(self, relative: str, path: Path) -> None:
        self._client.download_file(self.bucket, self._key(relative), str(path))

    def delete(self, relative: str) -> None:
        self._client.delete_object(Bucket=self.bucket, Key=self._key(relative))

    def move(self, relative: str, target: str) -> None:
        """Copy then delete (object storage has no rename): a stop in between leaves both."""
        source = {"Bucket": self.bucket, "Key": self._key(relative)}
        self._client.copy_object(Bucket=self.bucket, Key=self._key(target), CopySource=source)
        self.delete(relative)

    def names(self, folder: str = "") -> list[str]:
        """Every name directly under ``folder``: its objects and its sub-prefixes, sorted."""
        prefix = self._key(folder).rstrip("/") + "/" if (self.prefix or folder) else ""
        pages = self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/")
        found: set[str] = set()
        for page in pages:
            found.update(common["Prefix"][len(prefix):].rstrip("/") for common in page.get("CommonPrefixes", []))
            found.update(item["Key"][len(prefix):] for item in page.get("Contents", []))
        return sorted(name for name in found if name)

    def exists(self, relative: str) -> bool:
        """True if ``relative`` is an object, or a folder holding any."""
        key = self._key(relative)
        listed = self._client.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=2)
        return any(item["Key"] == key or item["Key"].startswith(key + "/") for item in listed.get("Contents", []))

    def list(self, folder: str, suffix: str) -> list[Entry]:
        prefix = self._key(folder).rstrip("/") + "/"
        entries = []
        for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                name = item["Key"][len(prefix):]
                if "/" not in name and name.endswith(suffix):
                    entries.append(Entry(name[: -len(suffix)], f"{self.bucket}/{item['Key']}",
                                         item["LastModified"].timestamp(), str(item.get("ETag", "")),
                                         int(item.get("Size", -1))))
        return sorted(entries, key=lambda entry: entry.stem)

    def subfolders(self) -> tuple[str, ...]:
        """Names of the prefixes directly under this one, sorted."""
        prefix = f"{self.prefix}/" if self.prefix else ""
        pages = self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/")
        return tuple(sorted(common["Prefix"][len(prefix):].rstrip("/")
                            for page in pages for common in page.get("CommonPrefixes", [])))


Folder = LocalFolder | ObjectFolder


def local_results_folders(root: Path) -> list[str]:
    """The names of the folders directly under ``root`` that hold a results folder (a runs table)."""
    return sorted(p.name for p in root.iterdir() if (p / "runs").is_dir()) if root.exists() else []


def remote_results_folders(root: str) -> list[str]:
    """The ``s3://`` locations directly under ``root`` that hold a results folder (a runs table):
    what ``ragkit run --out ROOT/NAME`` wrote."""
    folder = ObjectFolder(root)
    return [f"{folder.uri}/{name}" for name in folder.subfolders() if folder.exists(f"{name}/runs")]


def folder_state(location: str | Path, *folders: str) -> tuple[tuple[str, str], ...]:
    """What changes whenever a file is added, replaced or removed directly in one of ``folders``
    of ``location`` (a cache key part): every file's name and content tag."""
    files = open_folder(location)
    return tuple((f"{name}/{entry.stem}", entry.tag) for name in folders for entry in files.list(name, ""))


def open_folder(location: str | Path) -> Folder:
    return ObjectFolder(str(location)) if is_remote(location) else LocalFolder(Path(location))


def results_location(name: str, root: Path) -> str | Path:
    """Where a results folder of a listing lives: an s3:// location stays itself, a name is a
    folder under ``root`` (a local listing's root)."""
    return name if is_remote(name) else root / name


def storage_errors() -> tuple[type[Exception], ...]:
    """What reading object storage raises when it is unreachable or refuses: a user's problem to
    show, not a traceback. pyarrow's S3 filesystem raises OSError."""
    errors: tuple[type[Exception], ...] = (ConfigError, OSError)  # no s3 extra: ObjectFolder says which
    try:
        from botocore.exceptions import BotoCoreError, ClientError

        errors += (BotoCoreError, ClientError)  # no endpoint, no credentials, no such bucket
    except ImportError:
        pass
    return errors
