"""The OpenAPI document: `spec` documents the routes table, `plan` and `preview` give the
plan's and the preview answer's JSON schemas, `shapes` the building blocks they share."""

__all__: list[str] = []
