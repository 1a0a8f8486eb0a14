"""Where bytes go safely: atomic writes (``atomic``), locks (``locks``), local and object-store
folders (``folders``) and their change stamps (``folder_stamps``).

Public names load on first access (PEP 562), by import path: importing one submodule neither
loads nor depends on the others.
"""

from __future__ import annotations

from ragkit.lazy_exports import lazy_exports

_WHERE = {
    "write_atomic": "ragkit.storage.atomic",
    "write_bytes_atomic": "ragkit.storage.atomic",
    "write_json_atomic": "ragkit.storage.atomic",
    "as_location": "ragkit.storage.folders",
    "open_folder": "ragkit.storage.folders",
    "content_lock": "ragkit.storage.locks",
}

__all__ = [
    "as_location",
    "content_lock",
    "open_folder",
    "write_atomic",
    "write_bytes_atomic",
    "write_json_atomic",
]

__getattr__ = lazy_exports(__name__, _WHERE)
