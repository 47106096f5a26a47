"""recstore.compare layer."""
