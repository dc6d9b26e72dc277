"""The outbox relay: a separate process that delivers tool results to the Agent."""
