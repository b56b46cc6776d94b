"""One module per measure. Each defines ``NAME: str``, ``run(ctx) -> dict`` and ``report(figures) -> str``.

``run`` returns JSON-native figures (written to ``results/latest.json``);
``report`` turns them into a markdown section of ``results/report.md``. A
measure that checks a target should put ``{"target": ..., "ratio": ...,
"passed": bool}`` dicts in a ``"targets"`` list so the summary table shows them.
"""
