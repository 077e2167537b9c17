"""LocalStack plugins for running LocalStack on the host without Docker (see plugins.py)."""
