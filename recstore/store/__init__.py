"""recstore.store layer."""
