"""One parser module per family of file types; ``ragkit.corpus.loaders`` dispatches to them.

Each parser turns a file's bytes into ``ParsedDocument``s (``parsed.py``) and depends on
nothing but the file, so the corpus store caches its output by content hash.
"""
