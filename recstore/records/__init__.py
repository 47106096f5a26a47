"""recstore.records layer."""
