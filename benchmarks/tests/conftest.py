"""The fixtures the benchmarks' own tests share with the package's: this run's PostgreSQL schema, the OpenAI server."""

from support.fixtures import openai_server, postgres_dsn

__all__ = ["openai_server", "postgres_dsn"]
