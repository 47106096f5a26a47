"""recstore on Spark: build the Parquet layout of ``recstore export`` from raw NDJSON, and compare.
"""
