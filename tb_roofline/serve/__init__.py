"""Serving: run discovery, the service functions behind the HTTP API and the CLI, the
TensorBoard plugin and the command line."""
