"""A demo Agent for ``python -m service dev``: receives the relay's signed tool results and logs them."""
