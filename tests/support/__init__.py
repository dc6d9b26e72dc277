"""Test support: database selection, template cloning, service processes."""
