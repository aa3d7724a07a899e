"""The REST shapes, shared by the API and the console: `requests` (bodies and form fields
loaded through one validator) and `responses` (what the API answers)."""

__all__: list[str] = []
