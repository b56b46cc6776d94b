"""What every measure is handed: the mode, the inputs and where to write."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Context:
    """The run's settings, shared by every measure.

    ``quick`` asks for a small run (a subset of trajectories, fewer turns);
    ``trajectories`` are the ``.jsonl`` files to replay (already reduced to a
    subset in quick mode); ``results_dir`` is where a measure may write its
    PNGs (link them from ``report`` by file name); ``seed`` seeds every
    synthetic input so a run can be reproduced.
    """

    quick: bool
    trajectories: list[pathlib.Path]
    results_dir: pathlib.Path
    seed: int = 0

    @property
    def scratch_dir(self) -> pathlib.Path:
        """Return a folder for throwaway files (databases, transcripts); it is git-ignored."""
        path = self.results_dir / "tmp"
        path.mkdir(parents=True, exist_ok=True)
        return path
