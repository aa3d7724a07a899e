"""The pure parts of webhook deliveries: the signature, the body's bytes, the retry delays
and the URL rule the API and its OpenAPI document share."""

from __future__ import annotations

import ipaddress
import json
import random
import re
import uuid

import pytest

from service.config import Config, ConfigError
from service.domain.webhooks import delivery_body, signature
from service.notifier import Backoff
from service.schemas.requests import WEBHOOK_URL


def test_the_signature_is_hex_hmac_sha256_of_the_body() -> None:
    # the widely published HMAC-SHA256 example (key "key", the quick brown fox)
    body = b"The quick brown fox jumps over the lazy dog"
    assert signature(body, "key") == (
        "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
    )


def test_the_body_is_compact_json_in_the_pinned_order_with_the_console_link() -> None:
    event_id, run_id = uuid.uuid4(), uuid.uuid4()
    delivery = {
        "event_id": event_id,
        "event": "run.succeeded",
        "run_id": run_id,
        "run": {"id": str(run_id), "pipeline_name": "kunden-müller", "records_out": 3},
    }
    text = delivery_body(delivery, "https://etl.example.com/base/")
    assert list(json.loads(text)) == ["event_id", "event", "run", "console_url"]
    assert json.loads(text)["console_url"] == f"https://etl.example.com/base/ui/runs/{run_id}"
    assert ", " not in text and "müller" in text  # compact, UTF-8 as is
    assert delivery_body(delivery, "https://etl.example.com/base") == text  # same bytes


def test_backoff_doubles_with_jitter_up_to_its_cap() -> None:
    b = Backoff(1.0, 30.0)
    assert [b.delay_s(n, lambda: 0.5) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert b.delay_s(1, lambda: 0.0) == pytest.approx(0.8)
    assert b.delay_s(10_000, lambda: 1.0) == pytest.approx(36.0)


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("http://127.0.0.1:8080/hook", True),
        ("https://hooks.example.com/etl?team=data&x=%20", True),
        ("http://localhost", True),
        ("http://localhost.:65535/", True),
        ("http://a-b.c1/x#frag", True),
        ("HTTP://example.com/", False),
        ("http://example.com:0/", False),
        ("http://example.com:65536/", False),
        ("http://-bad.example.com/", False),
        ("http://user@example.com/", False),
        ("http://[::1]:8080/", True),
        ("https://[2001:db8::1]/x", True),
        ("http://[::ffff:127.0.0.1]", True),
        ("http://[1:2:3:4:5:6:7:8]:65535/", True),
        ("http://::1/", False),
        ("http://[::1%25lo]/", False),
        ("http://[1::2::3]/", False),
        ("http://[1:2:3:4:5:6:7:8:9]/", False),
        ("http://[127.0.0.1]/", False),
        ("http://[::1]:0/", False),
        ("http://example.com/ä", False),
        ("http://example.com/\n", False),
        ("http://example.com/a b", False),
    ],
)
def test_the_url_rule(url: str, ok: bool) -> None:
    assert bool(re.match(WEBHOOK_URL, url)) is ok


def test_the_url_rule_takes_exactly_the_ipv6_addresses_python_does() -> None:
    # RFC 3986's IPv6address written as one regular expression: compared with `ipaddress`
    # on real addresses (compressed, exploded, IPv4-mapped) and mutations of them.
    rng = random.Random(22)
    seeds = [
        str(ipaddress.IPv6Address(rng.getrandbits(128) >> rng.randrange(128))) for _ in range(200)
    ]
    seeds += [ipaddress.IPv6Address(rng.getrandbits(128)).exploded for _ in range(50)]
    seeds += [f"::ffff:{ipaddress.IPv4Address(rng.getrandbits(32))}" for _ in range(50)]
    taken = 0
    for _ in range(3000):
        text = list(rng.choice(seeds))
        for _ in range(rng.randrange(3)):
            at = rng.randrange(len(text))
            text[at : at + rng.randrange(2)] = rng.choice(["", "0", ":", ".", "f", "g", "::"])
        candidate = "".join(text)
        try:
            ipaddress.IPv6Address(candidate)
            valid = True
        except ValueError:
            valid = False
        taken += valid
        assert bool(re.match(WEBHOOK_URL, f"http://[{candidate}]:8080/x")) is valid, candidate
    assert 500 < taken < 2500  # both sides of the rule were tried


def test_the_public_url_and_the_delivery_settings_from_the_environment() -> None:
    default = Config.from_env({"ETL_API_BIND": "0.0.0.0:9000"})
    assert default.public_url == "http://0.0.0.0:9000"
    assert (default.webhook_timeout_s, default.webhook_max_attempts) == (5.0, 20)
    assert (default.webhook_backoff_s, default.webhook_backoff_max_s) == (1.0, 3600.0)
    cfg = Config.from_env(
        {"ETL_PUBLIC_URL": "https://etl.example.com/", "ETL_WEBHOOK_MAX_ATTEMPTS": "3"}
    )
    assert cfg.public_url == "https://etl.example.com" and cfg.webhook_max_attempts == 3
    for name, bad in (("ETL_WEBHOOK_MAX_ATTEMPTS", "0"), ("ETL_WEBHOOK_TIMEOUT_S", "soon")):
        with pytest.raises(ConfigError, match=name):
            Config.from_env({name: bad})
