"""The long-running processes: the coordinator, an executor, `etl up`'s supervisor, the
gunicorn command of the API, and the signal handling they share."""

__all__: list[str] = []
