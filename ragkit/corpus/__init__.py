"""Corpora: loading files, validating them, and the content-addressed corpus store."""
