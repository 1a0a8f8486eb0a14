"""Chunk sets and indexes shared by the machines of a cluster through object storage.

With ``RAGKIT_SHARED_ARTEFACTS=s3://bucket/prefix`` every machine still works on its own data
directory (indexes are searched on local disk, built under local locks, and the caches stay
local), and the object store is where a built artefact goes for the others: the machine that
builds a chunk set or an index publishes it, and a machine about to build the same
content-addressed artefact downloads it instead. So each is computed once per cluster and read
locally everywhere.

Publishing uploads the artefact's files under a folder of a random name, then writes its marker
(one PUT) listing that folder and the files. Readers follow markers only, so they never see a
half-uploaded artefact, and two machines publishing the same artefact at once never write the
same object: either marker names a complete copy. A download goes to a staging folder first and
is moved into the data directory the way a local build is published, its readiness file last.

Not shared: the embedding cache (an index carries its vectors; a machine that builds another
index embeds what its own cache lacks), the LLM and retrieval caches, and the full-text index,
which each machine adds to its copy as its own build step.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from ragkit.artefacts.chunksets import chunkset_path, decisions_path
from ragkit.errors import ConfigError
from ragkit.storage.atomic import make_dirs
from ragkit.storage.folders import ObjectFolder, is_remote
from ragkit.storage.locks import content_lock

MARKER = "published.json"


class SharedArtefacts:
    def __init__(self, uri: str) -> None:
        if not is_remote(uri):
            raise ConfigError(f"RAGKIT_SHARED_ARTEFACTS must be an s3://bucket/prefix URI, got '{uri}'")
        self.uri = uri
        self.folder = ObjectFolder(uri)

    def is_published(self, name: str) -> bool:
        return self.folder.exists(f"{name}/{MARKER}")

    def publish(self, name: str, root: Path, files: list[Path]) -> None:
        """Upload ``files`` (under ``root``) as artefact ``name``; the marker goes last."""
        folder = f"{name}/{uuid.uuid4().hex}"
        relative = [path.relative_to(root).as_posix() for path in files]
        for path, rel in zip(files, relative, strict=True):
            self.folder.upload_file(f"{folder}/{rel}", path)
        self.folder.write_bytes(f"{name}/{MARKER}", json.dumps({"folder": folder, "files": relative}).encode())

    def fetch(self, name: str, root: Path, staging: Path) -> list[str] | None:
        """Download artefact ``name`` into ``staging`` (emptied first); its files, relative to
        ``root``, in publishing order; None when no machine has published it."""
        try:
            marker = json.loads(self.folder.read_bytes(f"{name}/{MARKER}"))
        except self.folder.missing_errors:
            return None
        shutil.rmtree(staging, ignore_errors=True)
        for rel in marker["files"]:
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            self.folder.download_file(f"{marker['folder']}/{rel}", target)
        return list(marker["files"])


def move_into(staging: Path, root: Path, files: list[str], last: str, keep: frozenset[str] = frozenset()) -> None:
    """Move downloaded ``files`` from ``staging`` to ``root``, ``last`` (what makes the artefact
    visible to readers: a chunk set's parquet, an index's readiness marker) after all others;
    a file in ``keep`` that this machine already has stays as it is. The caller holds the
    artefact's content lock, so nothing else writes these paths."""
    ordered = [rel for rel in files if rel != last] + ([last] if last in files else [])
    for rel in ordered:
        target = root / rel
        if rel in keep and target.exists():
            continue
        make_dirs(target.parent)
        os.replace(staging / rel, target)
    shutil.rmtree(staging, ignore_errors=True)


class ArtefactSync:
    """What the executor shares: which files make a chunk set or an index, and under which lock
    each is published or downloaded. ``record(key)`` is a build step's record file."""

    def __init__(self, shared: SharedArtefacts, derived_dir: Path, data_dir: Path,
                 record: Callable[[str], Path]) -> None:
        self.shared = shared
        self.derived_dir = derived_dir
        self.data_dir = data_dir
        self.record = record
        self.db_dir = derived_dir / "lancedb"  # IndexStore's folder: a table chunks_<id>.lance, its .ready marker

    def _table(self, index_id: str) -> Path:
        return self.db_dir / f"chunks_{index_id}.lance"

    def _ready(self, index_id: str) -> Path:
        return self.db_dir / f"chunks_{index_id}.ready"

    def fetch_chunkset(self, chunkset_id: str) -> None:
        """Download the chunk set if this machine lacks it and another published it."""
        path = chunkset_path(self.derived_dir, chunkset_id)
        if path.exists():
            return
        with content_lock(self.data_dir, "chunkset", chunkset_id):
            if not path.exists():  # else written while this process waited
                self._fetch(f"chunksets/{chunkset_id}", path)

    def publish_chunkset(self, chunkset_id: str) -> None:
        files = [self.record(chunkset_id), decisions_path(self.derived_dir, chunkset_id),
                 chunkset_path(self.derived_dir, chunkset_id)]
        self._publish(f"chunksets/{chunkset_id}", lambda: files, "chunkset", chunkset_id)

    def fetch_index(self, index_id: str, chunkset_id: str) -> bool:
        """Under the index's lock, the index not ready here: download it if another machine
        published it. Its chunk set's build record and Chunking Judge decisions come with it (a
        machine that downloads an index never needs the chunk set, but its runs report what
        chunking cost and decided); this machine's own copies of those stay."""
        shutil.rmtree(self._table(index_id), ignore_errors=True)  # unmarked: a dead builder's or downloader's
        keep = (self.record(chunkset_id), decisions_path(self.derived_dir, chunkset_id))
        return self._fetch(f"indexes/{index_id}", self._ready(index_id), keep)

    def publish_index(self, index_id: str, chunkset_id: str, fulltext_key: str) -> None:
        """Publish a ready index no machine has published (built now, or before sharing was on);
        one that has its full-text index already goes with it and that step's record."""
        def files() -> list[Path]:  # listed under the lock: a full-text build adds files to the table
            return [self.record(chunkset_id), decisions_path(self.derived_dir, chunkset_id), self.record(index_id),
                    self.record(fulltext_key), *sorted(p for p in self._table(index_id).rglob("*") if p.is_file()),
                    self._ready(index_id)]

        self._publish(f"indexes/{index_id}", files, "index", index_id)

    def _publish(self, name: str, files: Callable[[], list[Path]], kind: str, key: str) -> None:
        """Upload an artefact this machine has and no machine has published yet, under its content
        lock (nothing rewrites it meanwhile); files that do not exist (a record older than records,
        a chunk set without a judge) are left out. One request when it is published already."""
        if self.shared.is_published(name):
            return
        with content_lock(self.data_dir, kind, key):
            if not self.shared.is_published(name):
                self.shared.publish(name, self.derived_dir, [path for path in files() if path.exists()])

    def _fetch(self, name: str, last: Path, keep: tuple[Path, ...] = ()) -> bool:
        """Download a published artefact into the derived folder, ``last`` (what makes it visible
        here) after its other files, files in ``keep`` only if missing here; False when none is
        published. The caller holds the artefact's lock."""
        stem = name.replace("/", "-")
        for leftover in (self.derived_dir / ".fetching").glob(f"{stem}-*"):  # a dead downloader's
            shutil.rmtree(leftover, ignore_errors=True)
        staging = self.derived_dir / ".fetching" / f"{stem}-{uuid.uuid4().hex[:8]}"
        files = self.shared.fetch(name, self.derived_dir, staging)
        if files is None:
            return False
        relative = frozenset(path.relative_to(self.derived_dir).as_posix() for path in keep)
        move_into(staging, self.derived_dir, files, last.relative_to(self.derived_dir).as_posix(), relative)
        return True
