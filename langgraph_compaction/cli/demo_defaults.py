"""The demo's defaults, apart from the demo itself so that ``langgraph-compaction --help`` imports nothing heavy."""

DEFAULT_TURNS = 40
DEFAULT_WINDOW = 48_000
DEFAULT_STORAGE = ".compaction"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
CHECKPOINTS_FILE = "checkpoints.sqlite"
