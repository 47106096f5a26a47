"""recstore.formats layer."""

# Inputs larger than this are rejected unread (`recstore ingest --max-record-bytes`): DuckDB and
# Python would each hold several copies of one such record. Here rather than in the reader, so
# that the store and the CLI name the default without importing the reader (issue 27.1).
DEFAULT_MAX_RECORD_BYTES = 64 * 2**20
