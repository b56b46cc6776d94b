"""The pure core: token counting, the three layers, the cutoff, summaries and their fidelity.

Functions over message lists; nothing in this package imports langgraph."""
