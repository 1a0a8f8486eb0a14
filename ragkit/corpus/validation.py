"""Checks run on a file before it is parsed, and sanitising of uploaded file names.

Every check reads at most a small sample of the file, and the size check runs before any
read, so an oversized or hostile upload is rejected without being loaded into memory.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path, PurePosixPath

from ragkit.errors import IngestError
from ragkit.settings import RagkitSettings

MB = 1024 * 1024
SAMPLE_BYTES = 8192
MAX_NAME_CHARS = 200
# Most filesystems cap a name at 255 bytes; 200 multi-byte characters can exceed that.
MAX_NAME_BYTES = 255
FALLBACK_NAME = "unnamed"

# Not accepted: an archive hides its size, depth and names until unpacked (zip bombs, "../"
# members); extracting is left to the user, who then ingests the folder.
ARCHIVE_TYPES = frozenset({"zip", "tar", "gz", "tgz", "bz2", "tbz2", "xz", "txz", "zst", "7z", "rar", "jar"})

# Types whose content must be text: a binary file renamed to one of these is rejected here,
# before a parser turns it into pages of garbage.
TEXT_TYPES = frozenset({"txt", "md", "html", "htm", "csv", "json", "jsonl", "yaml", "yml", "py", "pyi", "js", "ts",
                        "java", "go", "rs", "c", "h", "cpp", "hpp", "rb", "sh", "sql", "toml"})

# Only used to name what a rejected binary file looks like; the rejection itself rests on
# NUL / control bytes, so plain text that happens to start with "MZ" is still accepted.
_MAGIC = (
    (b"MZ", "a Windows executable"),
    (b"\x7fELF", "an ELF executable"),
    (b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (b"\xca\xfe\xba\xbe", "a Mach-O or Java class file"),
    (b"PK\x03\x04", "a ZIP archive or Office file"),
    (b"%PDF", "a PDF"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x1f\x8b", "gzip data"),
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
)
# Control bytes that do occur in real text files (tab, newlines, form feed, backspace, ANSI escape).
_TEXT_CONTROL_BYTES = frozenset({8, 9, 10, 12, 13, 27})


def file_type_of(path: Path | str) -> str:
    """The lower-case extension without the dot ('' when there is none)."""
    return PurePosixPath(str(path).replace("\\", "/")).suffix.lower().lstrip(".")


def validate_file(path: Path, settings: RagkitSettings) -> None:
    """Raise IngestError with the reason when ``path`` must not be ingested."""
    file_type = file_type_of(path)
    allowed = tuple(t.lower().lstrip(".") for t in settings.allowed_types)
    if not file_type:
        raise IngestError(f"file has no extension; allowed types: {', '.join(allowed)}")
    if file_type in ARCHIVE_TYPES and file_type not in allowed:
        raise IngestError(f"archives (.{file_type}) are not accepted: extract the files and ingest those")
    if file_type not in allowed:
        raise IngestError(f"file type '.{file_type}' is not allowed; allowed types: {', '.join(allowed)}")

    size = path.stat().st_size
    if size > settings.max_file_mb * MB:
        raise IngestError(
            f"file is {size / MB:.1f} MB, over the limit of {settings.max_file_mb:g} MB "
            f"(raise it with the environment variable RAGKIT_MAX_FILE_MB)"
        )
    if size == 0:
        raise IngestError("empty file")

    with open(path, "rb") as handle:
        sample = handle.read(SAMPLE_BYTES)
    if file_type in TEXT_TYPES:
        _check_text_sample(sample, file_type)
    elif file_type == "pdf" and b"%PDF-" not in sample[:1024]:
        raise IngestError("not a PDF file (no %PDF header)")
    elif file_type == "docx" and not sample.startswith(b"PK\x03\x04"):
        raise IngestError("not a DOCX file (a .docx is a ZIP package; this one is not)")


def _check_text_sample(sample: bytes, file_type: str) -> None:
    if sample.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise IngestError(f"UTF-16 encoded text in a .{file_type} file; save it as UTF-8")
    control = sum(1 for byte in sample if byte < 32 and byte not in _TEXT_CONTROL_BYTES)
    if b"\x00" in sample or control > len(sample) * 0.1:
        looks_like = next((name for magic, name in _MAGIC if sample.startswith(magic)), "binary data")
        raise IngestError(f"binary content in a .{file_type} file (looks like {looks_like})")


def validate_total_size(total_bytes: int, settings: RagkitSettings) -> None:
    """Raise IngestError when one ingestion (an upload or a folder) is larger than allowed."""
    if total_bytes > settings.max_total_mb * MB:
        raise IngestError(
            f"files total {total_bytes / MB:.1f} MB, over the limit of {settings.max_total_mb:g} MB "
            f"for one ingestion (raise it with the environment variable RAGKIT_MAX_TOTAL_MB)"
        )


_UNSAFE_CHARS = re.compile(r'[<>:"|?*]')
# Dots and whitespace, in any mix, at either end of a name (". .bashrc", "x.txt . ").
_EDGE_DOTS_AND_SPACES = re.compile(r"^[\s.]+|[\s.]+$")
# Characters drawn as a slash or backslash that NFKC leaves alone (it maps the fullwidth ones to
# "/" and "\\"): each is treated as the separator it imitates, so a name never shows a path.
_SLASH_LOOKALIKES = re.compile("[\u2044\u2215\u2216\u2571\u2572\u27cb\u27cd\u29f5\u29f8\u29f9\ufe68]")
# Device names Windows reserves in any folder and with any extension ("con.txt", "COM1 .md");
# NFKC has already turned "COM¹" into "COM1".
_WINDOWS_RESERVED = re.compile(r"(?i)(con|prn|aux|nul|com[0-9]|lpt[0-9])[ .]*(\..*)?")


def sanitize_name(name: str) -> str:
    """A safe plain file name for an uploaded file: no directories, no control characters.

    Control and format characters go, then the name is NFKC-normalised (fullwidth full stops and
    solidus, U+FF0E U+FF0E U+FF0F, would otherwise become "../" for any later reader that
    normalises), and only its last path
    component is kept. Dots and spaces at either end go: a leading dot makes a hidden file,
    which folder ingestion skips, and Windows drops trailing ones silently. A Windows device
    name ("con.txt") gets a "_" prefix.
    """
    visible = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    base = _SLASH_LOOKALIKES.sub("/", unicodedata.normalize("NFKC", visible)).replace("\\", "/").split("/")[-1]
    base = _EDGE_DOTS_AND_SPACES.sub("", _UNSAFE_CHARS.sub("_", base))
    if not base:
        return FALLBACK_NAME
    base = _truncate_keeping_extension(base)
    return f"_{base}" if _WINDOWS_RESERVED.fullmatch(base) else base


def _truncate_keeping_extension(name: str) -> str:
    path = PurePosixPath(name)
    suffix = path.suffix if len(path.suffix) <= 16 else ""
    stem = name[: len(name) - len(suffix)][: MAX_NAME_CHARS - len(suffix)]
    while stem and len((stem + suffix).encode("utf-8")) > MAX_NAME_BYTES:
        stem = stem[:-1]
    return (_EDGE_DOTS_AND_SPACES.sub("", stem) or FALLBACK_NAME) + suffix
