"""Helpers shared by several test modules (importable because pytest puts tests/ on sys.path)."""
