"""recstore.formats layer."""
