"""recstore.query layer."""
