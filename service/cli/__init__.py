"""The `etl` command: `main` and its one command table (`service.cli.main`)."""

from service.cli.main import main

__all__ = ["main"]
