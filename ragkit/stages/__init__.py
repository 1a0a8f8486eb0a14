"""The pipeline's stages grouped by role, in pipeline order: chunking, query, retrieval, context,
answer. Each is a toggleable component that declares its role and records every decision
(``ragkit.stages.base``, ``ragkit.stages.roles``)."""
