"""Benchmarks: this package side by side with LangChain's SummarizationMiddleware, langmem and no compaction.

Run ``python -m benchmarks [--quick]``; results go to ``benchmarks/results/``.
Each measure is a module in ``benchmarks/measures/`` (see ``benchmarks.runner``).
"""
