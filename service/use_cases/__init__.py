"""Use cases: each runs in one transaction that it opens itself."""
