"""Embedders: one registry (``embedders.base.embedders``), local models, HTTP servers, the vector cache.

Import what you need from its module (``ragkit.embedders.base``, ``.local``, ``.remote``,
``.cache``): this package imports nothing, so naming an embedder loads no model library.
"""
