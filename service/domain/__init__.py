"""Pure rules: states, reasons, receipts. No I/O here."""
