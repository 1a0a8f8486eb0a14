"""Hostile upload names, symbolic links, archives and size caps: nothing leaves the data directory."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragkit.corpus.store import CorpusStore
from ragkit.corpus.validation import MAX_NAME_BYTES, MAX_NAME_CHARS, sanitize_name
from ragkit.errors import ConfigError, IngestError
from ragkit.settings import get_settings
from tests.corpus.fuzzing import fuzz_settings

CANARY = "ragkit-canary-must-not-exist"

HOSTILE_NAMES = [
    # traversal
    "../evil.txt", f"../../{CANARY}.txt", "..\\..\\windows\\system32\\drivers\\etc\\hosts", "a/../../b.txt",
    "./../.hidden.txt", "....//....//x.txt", "..%2f..%2fx.txt", "..;/x.txt", "/../x.md", f"x/../../../../tmp/{CANARY}",
    # absolute paths
    "/etc/passwd", f"/tmp/{CANARY}.txt", "C:\\Windows\\win.ini", "\\\\server\\share\\x.txt", "//server/share/x.txt",
    "~/x.txt", "~root/.ssh/authorized_keys", "file:///etc/passwd", "D:x.txt", "C:/x.txt",
    # NUL and control characters
    "a\x00b.txt", "\x00", "evil.txt\x00.pdf", "a\nb.txt", "a\rb.md", "\x1b[31mred.txt", "\x7f.txt", "tab\there.txt",
    "\x85nel.txt", "bell\x07.txt", "\u202etxt.exe", "zero\u200bwidth.txt", "\ufeffbom.txt", "\u2028line.txt",
    # long names
    "a" * 300, "a" * 300 + ".txt", "\u00e9" * 300 + ".pdf", "\u65e5" * 300 + ".md", "x." + "y" * 300, "a" * 255,
    "\U0001f600" * 100 + ".txt", "a" * 1000 + "/b.txt", "a/" * 200 + "c.txt",
    # Windows reserved device names
    "CON", "con.txt", "NUL", "nul.pdf", "COM1", "com1.md", "LPT1", "lpt9.txt", "AUX", "PRN.csv", "CON .txt",
    "COM\u00b9.txt", "Con.tar.gz",
    # Unicode look-alikes of "/", "\" and "."
    "..\uff0f..\uff0fetc\uff0fpasswd", "..\u2215..\u2215x.txt", "..\u2044..\u2044x.txt", "\uff0e\uff0e/x.txt",
    "\uff0e\uff0e\uff0f\uff0e\uff0e\uff0fx.txt", "..\uff3c..\uff3cx.txt", "\u2025/x.txt", "..\u29f8x.txt",
    "a\ufe68b.txt", "\uff41\uff44\uff4d\uff49\uff4e.txt", "\uff43\uff4f\uff4e.txt", "\u2026/x",
    # trailing dots and spaces, NTFS streams
    "x.txt.", "x.txt ", "x.txt. . .", "x .", "   x.txt   ", "x.txt\t", "x.txt::$DATA",
    # empty, only dots, only separators
    "", ".", "..", "...", "....", ". .", " ", "/", "\\", "./", "../", "./.", "/.", "\x00\x00",
    # shell and URL characters
    "a<b>.txt", 'a"b.txt', "a|b.txt", "a?b*.txt", "$(rm -rf ~).txt", "`id`.txt", "a;b.txt",
    # hidden files
    ".bashrc", ".ssh/authorized_keys", ".env", ".git/config",
]
# Drawn like "/" or "\\" (an independent list: the tests do not reuse the code's own).
SLASH_LOOKALIKES = set("\u2044\u2215\u2216\u29f5\u29f8\u29f9\ufe68\uff0f\uff3c\u2571\u2572\u27cb\u27cd")
WINDOWS_DEVICES = {"con", "prn", "aux", "nul", *(f"com{n}" for n in range(10)), *(f"lpt{n}" for n in range(10))}


@pytest.mark.unit
def test_there_are_a_hundred_distinct_hostile_names() -> None:
    assert len(HOSTILE_NAMES) == len(set(HOSTILE_NAMES)) == 100


def assert_safe_name(name: str) -> None:
    assert name and name not in (".", "..")
    assert "/" not in name and "\\" not in name and not name.startswith(".")
    assert not SLASH_LOOKALIKES & set(name)
    assert not any(unicodedata.category(char)[0] == "C" for char in name)
    assert unicodedata.normalize("NFKC", name) == name
    assert len(name) <= MAX_NAME_CHARS + 1 and len(name.encode("utf-8")) <= MAX_NAME_BYTES + 1  # +1: a "_" prefix
    assert name == name.rstrip(". ") and name == name.strip()
    assert name.split(".")[0].strip().lower() not in WINDOWS_DEVICES
    assert sanitize_name(name) == name


@pytest.mark.unit
@pytest.mark.parametrize("hostile", HOSTILE_NAMES)
def test_sanitize_name_makes_every_hostile_name_one_plain_file_name(hostile: str, tmp_path: Path) -> None:
    name = sanitize_name(hostile)
    assert_safe_name(name)
    assert (tmp_path / name).resolve().parent == tmp_path.resolve()


@fuzz_settings(ci=200, full=1500)
@given(hostile=st.text(st.characters(codec="utf-8"), max_size=300)
       | st.lists(st.sampled_from(["..", ".", "/", "\\", "\uff0f", "\u2215", "\uff0e", "con", "a", " ", "\x00",
                                   "\u0301"]),
                  max_size=20).map("".join))
def test_fuzz_sanitize_name(hostile: str) -> None:
    assert_safe_name(sanitize_name(hostile))


class Upload:
    """What Streamlit's UploadedFile offers save_uploads: a name from the browser and the bytes."""

    def __init__(self, name: str, data: bytes) -> None:
        self.name, self._data = name, data

    def getvalue(self) -> bytes:
        return self._data


def tree(folder: Path) -> set[str]:
    return {str(path) for path in folder.rglob("*")}


@pytest.mark.integration
def test_hostile_uploads_stay_in_the_data_dir_and_ingest_or_are_named(isolated_data_dir: Path) -> None:
    from ragkit.app.uploads import save_uploads

    outside = isolated_data_dir.parent
    before = tree(outside) - tree(isolated_data_dir)
    uploads = [Upload(name, f"upload {number}: plain text".encode()) for number, name in enumerate(HOSTILE_NAMES)]
    paths = save_uploads(uploads, "../..", f"/tmp/{CANARY}", "con")

    root = (isolated_data_dir / "uploads").resolve()
    assert len(set(paths)) == len(uploads), "two uploads were written to one file"
    for path, upload in zip(paths, uploads):
        assert root in path.parents and path.read_bytes() == upload.getvalue()
    assert tree(outside) - tree(isolated_data_dir) == before, "a file appeared outside the data dir"
    assert not Path(f"/tmp/{CANARY}").exists() and not Path(f"/tmp/{CANARY}.txt").exists()

    report = CorpusStore().ingest(paths, "hostile")
    assert len(report.files) == len(uploads)
    assert all(item.reason for item in report.files if item.status == "skipped")
    texts = {document.text for document in CorpusStore().load("hostile").documents}
    assert texts <= {upload.getvalue().decode() for upload in uploads}


@pytest.mark.unit
def test_inside_refuses_escapes_links_out_and_unresolvable_paths(tmp_path: Path) -> None:
    from ragkit.app.uploads import inside

    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (root / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    assert inside(root / "sub" / "x.txt", root) == (root / "sub" / "x.txt").resolve()
    (root / "link-out").symlink_to(elsewhere)
    (root / "loop").symlink_to(root / "loop")
    for path in [root / "..", root / "sub" / ".." / ".." / "x", Path("/etc/passwd"), root / "link-out" / "x.txt",
                 root / "a\x00b", root / "loop" / "x"]:
        with pytest.raises(ConfigError):
            inside(path, root)


@pytest.mark.integration
def test_save_uploads_never_writes_through_a_symbolic_link(isolated_data_dir: Path, tmp_path: Path) -> None:
    from ragkit.app.uploads import save_uploads

    folder = isolated_data_dir / "uploads" / "batch"
    folder.mkdir(parents=True)
    target_outside, target_inside = tmp_path / "secret.txt", folder / "kept.txt"
    target_outside.write_text("outside", encoding="utf-8")
    target_inside.write_text("inside", encoding="utf-8")
    (folder / "out.txt").symlink_to(target_outside)
    (folder / "in.txt").symlink_to(target_inside)
    for name in ("out.txt", "in.txt"):
        with pytest.raises(ConfigError):
            save_uploads([Upload(name, b"overwritten")], "batch")
    assert target_outside.read_text(encoding="utf-8") == "outside"
    assert target_inside.read_text(encoding="utf-8") == "inside"


@pytest.mark.integration
def test_a_folder_with_symlinks_to_outside_skips_and_names_them(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "password.txt").write_text("hunter2 is the password", encoding="utf-8")
    folder = tmp_path / "upload"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("Ordinary notes.", encoding="utf-8")
    (folder / "sub" / "passwords.txt").symlink_to(secrets / "password.txt")
    (folder / "linked-folder").symlink_to(secrets, target_is_directory=True)
    (folder / "notes-again.txt").symlink_to(folder / "notes.txt")

    report = CorpusStore().ingest([folder], "linked")
    statuses = {item.doc_id: (item.status, item.reason) for item in report.files}
    assert statuses["notes.txt"] == ("ingested", "")
    for doc_id in ("sub/passwords.txt", "linked-folder", "notes-again.txt"):
        status, reason = statuses[doc_id]
        assert status == "skipped" and reason.startswith("symbolic link, not followed"), (doc_id, reason)
    assert all("hunter2" not in document.text for document in CorpusStore().load("linked").documents)


@pytest.mark.integration
@pytest.mark.parametrize("name", ["corpus.zip", "backup.tar", "docs.tar.gz", "data.7z"])
def test_archives_are_named_and_skipped(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    (tmp_path / "ok.txt").write_text("Fine.", encoding="utf-8")
    report = CorpusStore().ingest([tmp_path / name, tmp_path / "ok.txt"], "archives")
    [archive, ok] = report.files
    assert archive.status == "skipped" and archive.reason.startswith("archives (.") and "not accepted" in archive.reason
    assert ok.status == "ingested"


@pytest.fixture
def caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGKIT_MAX_FILE_MB", "0.01")  # about 10 KB per file
    monkeypatch.setenv("RAGKIT_MAX_TOTAL_MB", "0.03")  # about 31 KB per upload
    get_settings.cache_clear()


@pytest.mark.integration
def test_the_per_file_cap_is_enforced_by_the_library(caps: None, tmp_path: Path) -> None:
    from ragkit.app.uploads import save_uploads

    paths = save_uploads([Upload("big.txt", b"x " * 8_000), Upload("small.txt", b"small file")], "capped")
    report = CorpusStore().ingest(paths, "capped")
    big, small = report.files
    assert big.status == "skipped" and "over the limit of 0.01 MB" in big.reason and "RAGKIT_MAX_FILE_MB" in big.reason
    assert small.status == "ingested"


@pytest.mark.integration
def test_the_per_upload_cap_is_enforced_by_the_library_before_parsing(caps: None, tmp_path: Path) -> None:
    from ragkit.app.uploads import save_uploads

    paths = save_uploads([Upload(f"part{n}.txt", b"y " * 4_500) for n in range(4)], "capped")
    with pytest.raises(IngestError, match=r"over the limit of 0\.03 MB .*RAGKIT_MAX_TOTAL_MB"):
        CorpusStore().ingest(paths, "capped")
    assert CorpusStore().list() == []
    assert not any((get_settings().resolved_data_dir() / "documents").glob("*")), "a file was parsed"
    # Within the caps the same library call ingests.
    assert CorpusStore().ingest(paths[:3], "capped").ingested_count == 3


@pytest.mark.integration
@pytest.mark.skipif(os.name == "nt", reason="symlinks")
def test_a_directly_named_symlink_is_not_followed_either(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("Real.", encoding="utf-8")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    [item] = CorpusStore().ingest([tmp_path / "link.txt"], "direct").files
    assert item.status == "skipped" and item.reason.startswith("symbolic link")
