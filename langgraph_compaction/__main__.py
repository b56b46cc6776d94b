"""``python -m langgraph_compaction``: the same command as ``langgraph-compaction``."""

from .cli import main

raise SystemExit(main())
