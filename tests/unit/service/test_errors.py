"""The HTTP error vocabulary is written once (`service.errors.HTTP_ERRORS`): every error
class answers a status it describes, and the classes named for a status carry its code."""

from __future__ import annotations

import service.errors as errors


def _classes(base: type) -> list[type]:
    return [c for sub in base.__subclasses__() for c in (sub, *_classes(sub))]


def test_every_error_answers_a_status_the_vocabulary_describes() -> None:
    classes = _classes(errors.ServiceError)
    assert len(classes) >= 10
    assert {c.status for c in classes} <= set(errors.HTTP_ERRORS)


def test_a_status_has_one_code_for_our_errors_and_falcons() -> None:
    assert errors.NotFound("x").as_body()["error"]["code"] == errors.error_code(404)
    assert errors.DatabaseUnavailable("x").code == "database_unavailable"
    assert errors.error_code(405) == "method_not_allowed"
    assert errors.error_code(418) == "http_error"
