"""``recstore serve``: a local web app and JSON API over one store, with live ingest.

Layers, top to bottom: ``app`` (the process: uvicorn, the serve file), ``security`` (the guard
middleware), ``pages`` and ``api`` (routes), ``ingest`` (POSTed records, OTLP/HTTP, watched
folders), ``data`` (each page's data as library calls), ``hold`` (how the process holds the
store). Importing this package pulls in Starlette; the CLI imports it only to serve.
"""
