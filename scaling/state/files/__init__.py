"""The study folder's files: one module per file, its name, format, reader, writer; no decisions."""
