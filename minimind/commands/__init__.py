"""CLI commands, one module each (see minimind/cli.py for the contract)."""
