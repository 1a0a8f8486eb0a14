"""Pre-parse checks (type, size, empty, binary, batch total) and upload name sanitising."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragkit.corpus.validation import sanitize_name, validate_file, validate_total_size
from ragkit.errors import IngestError
from ragkit.settings import RagkitSettings

MB = 1024 * 1024


@pytest.fixture
def settings() -> RagkitSettings:
    return RagkitSettings(max_file_mb=50, max_total_mb=100)


def write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


@pytest.mark.integration
def test_a_plain_text_file_passes(tmp_path: Path, settings: RagkitSettings) -> None:
    validate_file(write(tmp_path / "ok.txt", b"MZ is also how some text starts.\n"), settings)


@pytest.mark.integration
def test_disallowed_type_lists_allowed_types(tmp_path: Path, settings: RagkitSettings) -> None:
    with pytest.raises(IngestError) as error:
        validate_file(write(tmp_path / "tool.exe", b"MZ\x90\x00"), settings)
    assert "'.exe' is not allowed" in str(error.value)
    assert "pdf, docx, txt, md" in str(error.value)


@pytest.mark.integration
def test_file_without_extension_is_rejected(tmp_path: Path, settings: RagkitSettings) -> None:
    with pytest.raises(IngestError, match="no extension"):
        validate_file(write(tmp_path / "README", b"hello"), settings)


@pytest.mark.integration
def test_oversized_file_is_rejected_by_size_before_it_is_read(
    tmp_path: Path, settings: RagkitSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.txt"
    with open(big, "wb") as handle:
        handle.truncate(60 * MB)  # sparse: 60 MB of NUL bytes without writing them
    real_open = open

    def refuse_to_open(file, *args, **kwargs):
        if Path(file) == big:
            raise AssertionError("the oversized file was opened")
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refuse_to_open)
    with pytest.raises(IngestError) as error:
        validate_file(big, settings)
    message = str(error.value)
    assert "60.0 MB" in message and "50 MB" in message and "RAGKIT_MAX_FILE_MB" in message


@pytest.mark.integration
def test_empty_file_is_rejected(tmp_path: Path, settings: RagkitSettings) -> None:
    with pytest.raises(IngestError, match=r"^empty file$"):
        validate_file(write(tmp_path / "empty.txt", b""), settings)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("name", "content", "looks_like"),
    [
        ("setup.txt", b"MZ\x90\x00" + bytes(range(256)) * 4, "a Windows executable"),
        ("tool.md", b"\x7fELF\x02\x01\x01\x00" + bytes(64), "an ELF executable"),
        ("photo.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "a PNG image"),
        ("blob.json", b"\x01\x02\x03\x04\x05\x06 abc", "binary data"),
    ],
)
def test_binary_content_in_text_types_is_rejected(
    tmp_path: Path, settings: RagkitSettings, name: str, content: bytes, looks_like: str
) -> None:
    with pytest.raises(IngestError) as error:
        validate_file(write(tmp_path / name, content), settings)
    assert "binary content" in str(error.value) and looks_like in str(error.value)


@pytest.mark.integration
def test_utf16_text_is_rejected_with_advice(tmp_path: Path, settings: RagkitSettings) -> None:
    with pytest.raises(IngestError, match="save it as UTF-8"):
        validate_file(write(tmp_path / "wide.txt", "hello".encode("utf-16")), settings)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [("fake.pdf", b"MZ\x90\x00 not a pdf", "no %PDF header"), ("fake.docx", b"%PDF-1.4", "not a DOCX")],
)
def test_binary_types_must_have_their_signature(
    tmp_path: Path, settings: RagkitSettings, name: str, content: bytes, reason: str
) -> None:
    with pytest.raises(IngestError, match=reason):
        validate_file(write(tmp_path / name, content), settings)


@pytest.mark.unit
def test_total_size_limit(settings: RagkitSettings) -> None:
    validate_total_size(100 * MB, settings)
    with pytest.raises(IngestError) as error:
        validate_total_size(100 * MB + 1, settings)
    assert "100 MB" in str(error.value) and "RAGKIT_MAX_TOTAL_MB" in str(error.value)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("hostile", "expected"),
    [
        ("../../x.txt", "x.txt"),
        ("/etc/passwd", "passwd"),
        ("C:\\Users\\me\\report.pdf", "report.pdf"),
        ("..\\..\\windows\\evil.md", "evil.md"),
        ("na\x00me.txt", "name.txt"),
        ("tab\tnew\nline\x7f.csv", "tabnewline.csv"),
        ("..", "unnamed"),
        (".", "unnamed"),
        ("", "unnamed"),
        ("   ", "unnamed"),
        ("dir/", "unnamed"),
        (".bashrc", "bashrc"),
        ("what?.txt", "what_.txt"),
        ("plain name.docx", "plain name.docx"),
    ],
)
def test_sanitize_name_table(hostile: str, expected: str) -> None:
    assert sanitize_name(hostile) == expected


@pytest.mark.unit
def test_sanitize_name_truncates_long_names_keeping_the_extension() -> None:
    long_name = "a" * 300 + ".pdf"
    result = sanitize_name(long_name)
    assert len(result) == 200 and result.endswith(".pdf") and result.startswith("aaa")
    multibyte = sanitize_name("\u00e9" * 300 + ".txt")
    assert multibyte.endswith(".txt") and len(multibyte.encode("utf-8")) <= 255
