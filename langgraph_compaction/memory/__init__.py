"""Long-term memory: the daily ledger the flush writes, and its consolidation into MEMORY.md.

Usable without a graph."""
