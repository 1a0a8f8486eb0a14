"""A results folder: long, tidy, append-only tables under one folder (local or ``s3://``).

The modules, bottom up (each imports only those above it in this list):
``schema`` (tables, columns, dtypes, the folder's layout), ``integrity`` (each part checked when
read, damaged ones set aside), ``copies`` (what a merged read copy is, and reading from it),
``parts`` (``PartStore``: run files, question sets, parts and their commit markers),
``compaction`` (a finished run's parts into one), ``staleness`` (rows of edited or removed
questions), ``copy_writer`` (writing merged copies), ``result_store`` (``ResultStore``: tables as readers
see them), and beside them ``check`` (``ragkit check``) and ``output_folder`` (where ``--out`` may
write).

``ResultStore`` is importable from here, and the schema names that callers import through the
package; new code imports names from their module.
"""

from ragkit.results.result_store import ResultStore
from ragkit.results.schema import PART_TABLES, SCHEMAS, USAGE_FIELDS, empty_table

__all__ = ["PART_TABLES", "SCHEMAS", "USAGE_FIELDS", "ResultStore", "empty_table"]
