"""Fixtures for the formats tests: the private PostgreSQL server (tests/postgres.py)."""

from postgres import postgres_dsn  # noqa: F401  (registers the fixture)
