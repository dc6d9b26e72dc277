"""Table definitions and the named statements that read and write them."""
