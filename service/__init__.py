"""Lineup Runtime workspace service."""
