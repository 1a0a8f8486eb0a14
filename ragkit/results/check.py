"""``ragkit check``: what in a results folder is damaged, left behind or out of date, and repair.

- **damaged**: a committed part that is missing, fails its size or checksum (or, for parts
  committed before checksums, cannot be read by Arrow), or whose commit marker cannot be read;
  every file is read whole (``ragkit.results.integrity.find_damaged``). Run and question files Arrow
  cannot read are listed too: ``ragkit run`` writes them again.
- **orphans**: files no reader ever uses: parts written but never committed (a run stopped by a
  full disk or a kill between a part and its marker), parts and markers a compaction replaced
  but did not remove, and temporary files of writes that never finished.
- **stale copies**: merged read copies (``ragkit.results.copies``) that do not copy exactly the
  committed parts, or that cannot be read whole (their page checksums fail).

``repair`` (under the folder's writer lock) sets damaged parts aside (``_damaged/``, so
``ragkit run`` computes their questions again), removes the orphans and rebuilds the merged copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragkit.results.copies import MERGED_TABLES, merged_copy
from ragkit.results.integrity import DamagedPart, find_damaged, set_aside
from ragkit.results.result_store import ResultStore
from ragkit.results.schema import COMMITS, MERGED, PART_TABLES
from ragkit.storage.folders import LocalFolder

# A temporary file of ragkit.storage.atomic: ".<name>.<random>.tmp" beside its target.
TEMPORARY_SUFFIX = ".tmp"


@dataclass
class FolderCheck:
    damaged: list[DamagedPart] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # run and question files Arrow cannot read
    orphans: list[str] = field(default_factory=list)  # relative paths
    stale_copies: list[str] = field(default_factory=list)  # "path: why"

    @property
    def clean(self) -> bool:
        return not (self.damaged or self.unreadable or self.orphans or self.stale_copies)

    def lines(self) -> list[str]:
        return ([f"damaged: {item.describe()}" for item in self.damaged]
                + [f"unreadable: {item} (`ragkit run` writes it again)" for item in self.unreadable]
                + [f"orphan: {path}" for path in self.orphans]
                + [f"stale copy: {item}" for item in self.stale_copies])

    def headline(self, location: str) -> str:
        if self.clean:
            return f"{location}: every committed part is intact; no orphan file, no stale merged copy"
        return (f"{location}: {len(self.damaged)} damaged part(s), {len(self.unreadable)} unreadable run or question "
                f"file(s), {len(self.orphans)} orphan file(s), {len(self.stale_copies)} stale merged copy(ies)")


def check_command(store: ResultStore, location: str, repairing: bool) -> int:
    """``ragkit check``: print what is wrong (and, ``repairing``, what was done); 1 when
    something is wrong and was not repaired."""
    if not repairing:
        found = check_folder(store)
        print("\n".join([found.headline(location), *found.lines()]))
        return 0 if found.clean else 1
    with store.writer_lock():  # nothing writes the folder while it is repaired
        found = check_folder(store)
        print("\n".join([found.headline(location), *repair(store, found)]))
    return 0


def check_folder(store: ResultStore) -> FolderCheck:
    """Everything ``ragkit check`` lists, every file read whole."""
    found = FolderCheck(damaged=find_damaged(store, fresh=True))
    for name in ("runs", "questions"):
        found.unreadable += [f"{name}/{entry.stem}.parquet" for entry in store.files.list(name, ".parquet")
                             if not store.read_files(name, [entry])]
    found.orphans = orphans(store)
    found.stale_copies = stale_copies(store)
    return found


def orphans(store: ResultStore) -> list[str]:
    """Relative paths of the files no reader uses (see the module docstring)."""
    committed = store.committed_parts()
    found = [f"{name}/{entry.stem}.parquet" for name in PART_TABLES
             for entry in store.files.list(name, ".parquet") if entry.stem not in committed]
    found += [f"{COMMITS}/{entry.stem}.json" for entry in store.files.list(COMMITS, ".json")
              if entry.stem not in committed]  # markers of parts a compaction replaced
    if isinstance(store.files, LocalFolder):  # object storage writes whole objects: no temporaries
        for folder in ("", "runs", "questions", COMMITS, MERGED, *PART_TABLES):
            found += [f"{folder}/{name}".lstrip("/") for name in store.files.names(folder)
                      if name.startswith(".") and name.endswith(TEMPORARY_SUFFIX)]
    return sorted(found)


def stale_copies(store: ResultStore) -> list[str]:
    """The merged copies that copy other parts than the committed ones, or cannot be read whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    stale = []
    for name in ("runs", *MERGED_TABLES):
        entry = next((e for e in store.files.list(MERGED, ".parquet") if e.stem == name), None)
        if entry is None:
            continue
        relative = f"{MERGED}/{name}.parquet"
        try:
            pq.ParquetFile(entry.path, filesystem=store.files.filesystem, page_checksum_verification=True).read()
        except (pa.ArrowException, OSError, ValueError) as error:
            stale.append(f"{relative}: cannot be read ({type(error).__name__})")
            continue
        copy = merged_copy(store, name)
        current = (store.files.list("runs", ".parquet") if name == "runs" else store.committed_entries(name))
        if copy is None or copy.parts != {part.stem: part.tag for part in current}:
            copied = len(copy.parts) if copy is not None else 0
            stale.append(f"{relative}: copies {copied} file(s), the folder has {len(current)} committed")
    return stale


def repair(store: ResultStore, found: FolderCheck) -> list[str]:
    """Set the damaged parts aside, remove the orphans, rebuild the merged copies; one line per
    thing done. The caller holds ``writer_lock``."""
    done = []
    for item in set_aside(store, found.damaged):
        done.append(f"set aside: {item.part} in {item.set_aside_in}; `ragkit run` on its experiment computes its "
                    f"{len(item.question_ids)} question(s) again")
    for path in found.orphans:
        store.files.delete(path)
        done.append(f"removed: {path}")
    if found.stale_copies or found.damaged:
        for stale in found.stale_copies:  # a copy that cannot be read may still name current parts
            store.files.delete(stale.split(":", 1)[0])
        rebuilt = store.merge()
        done.extend(f"rebuilt: {MERGED}/{name}.parquet" for name in rebuilt)
    return done

