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
from pathlib import Path

from ragkit.atomic import make_dirs
from ragkit.folders import ObjectFolder, is_remote
from ragkit.registry import ConfigError

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
