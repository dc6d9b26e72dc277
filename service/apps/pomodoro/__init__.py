"""Pomodoro: a focus timer (its manifest, decisions and registration live in this folder)."""
