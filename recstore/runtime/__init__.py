"""recstore.runtime layer."""
