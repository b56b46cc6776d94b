"""Where users meet the engine: graph nodes (``add_compaction``), ``create_agent`` middleware,
the prebuilt hook, the functional helper and the agent's tools. Each is a short adapter over the engine."""
