"""Example graphs served by ``langgraph dev`` (see langgraph.json)."""
