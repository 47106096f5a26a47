"""recstore: an event-sourced store for AI-agent run records.

The top level is the API; the layers are subpackages (see ARCHITECTURE in the README).
"""

from recstore.canonical import canonical_json, loads_strict, sha256_canonical, sha256_text

__all__ = ["canonical_json", "loads_strict", "sha256_canonical", "sha256_text"]
__version__ = "0.1.0"
