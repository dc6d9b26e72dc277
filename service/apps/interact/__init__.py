"""Interact: the main conversation and its standard interactions (this folder is the app)."""
