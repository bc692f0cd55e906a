"""One module per API (a REQUEST and a RESPONSE declaration), plus headers and embedded payloads."""
