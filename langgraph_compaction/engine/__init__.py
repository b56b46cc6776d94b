"""The compaction engine every front drives: the stages, their effects, the driver pair, the state record.

- ``nodes.CompactionEngine``: the public interface (the four graph nodes and the gate's router, the whole pass,
  overflow recovery);
- ``gate``, ``offload``, ``flush``, ``summarize``, ``background``: one module per stage, functions over what they use;
- ``effects`` and ``driver``: the closed set of effects a step yields, and the one sync and one async driver;
- ``state``: the ``compaction`` record, every key declared, and its reducer; ``jobs``: the background jobs.
"""

from .nodes import CompactionEngine, PassResult

__all__ = ["CompactionEngine", "PassResult"]
