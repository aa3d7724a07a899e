"""The API client side of `etl` (`pipelines`, `run`, `runs`, `schedules`, `token`): an HTTP client
(`http`), the commands (`commands`) and live progress (`watch`). It knows only HTTP: it
imports nothing of the server (enforced by import-linter)."""

__all__: list[str] = []
