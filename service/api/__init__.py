"""The REST API under `/api/v1`: one routes table (`routes`), thin falcon resources over
`service.domain`, bearer-token auth, the middleware and error handlers, `/metrics`, the
preview, and the OpenAPI document built from the same table (`openapi/`)."""

__all__: list[str] = []
