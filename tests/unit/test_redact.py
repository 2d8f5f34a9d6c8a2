"""The redactor: every credential pattern and every configured secret, whole or echoed in
another case or cut short, is replaced by a visible mark; what is not a secret is left alone."""

from __future__ import annotations

import pytest

from flowledger.config import AlertsConfig
from flowledger.domain.redact import MARK, NO_SECRETS, redact, secrets_of

KEY = "n8nKey_Q7f3Z9xL2mP4vR8s"
SECRETS = secrets_of([KEY, "hunter2-Passw0rd", None, "", "abc"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer eyJhbGc.iOiJ.IUzI1 sent", f"Authorization: Bearer {MARK} sent"),
        ("authorization=Basic dXNlcjpwYXNz", f"authorization=Basic {MARK}"),
        ('{"Authorization":"Token abc123def"}', f'{{"Authorization":"Token {MARK}"}}'),
        ("Proxy-Authorization: opaque-credential", f"Proxy-Authorization: {MARK}"),
        ("curl -H 'Authorization: Bearer abcdef12' x", f"curl -H 'Authorization: Bearer {MARK}' x"),
        ("got Bearer abcdefgh12 back", f"got Bearer {MARK} back"),
        ("header Basic QWxhZGRpbjpvcGVu", f"header Basic {MARK}"),
        ("Basic authentication required", f"Basic {MARK} required"),  # taken for one
        ("https://x/y?token=abc123&a=1", f"https://x/y?token={MARK}&a=1"),
        ("https://x/y?a=1&api_key=zz9#top", f"https://x/y?a=1&api_key={MARK}#top"),
        ("GET /v1?apikey=k1&access_token=t2", f"GET /v1?apikey={MARK}&access_token={MARK}"),
        ("password=s3cret next", f"password={MARK} next"),
        ("db_passwd = hunter", f"db_passwd = {MARK}"),
        ("client_secret=xyz", f"client_secret={MARK}"),
        ('{"token": "a\\"b", "ok": "k"}', f'{{"token": "{MARK}", "ok": "k"}}'),
        ('{"access_token":"qq","n":1}', f'{{"access_token":"{MARK}","n":1}}'),
        ('{\\"password\\":\\"xx\\"}', f'{{\\"password\\":\\"{MARK}\\"}}'),
        ("{'api_key': 'val'}", f"{{'api_key': '{MARK}'}}"),
        ("X-N8N-API-KEY: eyJ0eXAi0", f"X-N8N-API-KEY: {MARK}"),
        ("secret: 12345678", f"secret: {MARK}"),
        ("postgresql://app:pa55@db/x", f"postgresql://app:{MARK}@db/x"),
        ("use flt_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde now", f"use flt_{MARK} now"),
    ],
)
def test_each_credential_pattern_is_redacted_keeping_its_name(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Request failed with status code 422",
        "Invalid token: expired",
        "Bearer token expired",
        "the token was refused",
        "op:invoice:INV-42:send",
        "sha256:" + "ab" * 32,
        "https://x/y?page=2&limit=50",
        "n8n execution 11 failed in workflow send invoices (wf)",
    ],
)
def test_text_without_a_secret_is_unchanged(text: str) -> None:
    assert redact(text, SECRETS) == text


@pytest.mark.parametrize(
    ("echo", "why"),
    [
        (KEY, "whole"),
        (KEY.lower(), "lowercased"),
        (KEY.upper(), "uppercased"),
        (KEY[:8], "truncated to 8"),
        (KEY[:13].lower(), "truncated and lowercased"),
        (KEY[5:17], "a piece from the middle"),
        (KEY[-9:], "its tail"),
        ("hunter2-passw0rd", "another secret, lowercased"),
    ],
)
def test_a_configured_secret_echoed_in_any_case_or_cut_to_8_is_redacted(
    echo: str, why: str
) -> None:
    text = f"n8n said: key {echo} is not valid"
    assert redact(text, SECRETS) == f"n8n said: key {MARK} is not valid", why
    glued = redact(f"#{echo}%", SECRETS)  # inside a longer run of characters
    assert glued == f"#{MARK}%", why


def test_a_piece_shorter_than_8_is_not_a_secret() -> None:
    assert redact(f"key {KEY[:7]} and {KEY[3:10]}", SECRETS) == f"key {KEY[:7]} and {KEY[3:10]}"


def test_several_secrets_in_one_run_are_all_redacted() -> None:
    text = f"{KEY.lower()}:{KEY[:9]}/hunter2-Passw0rd"
    assert redact(text, SECRETS) == f"{MARK}:{MARK}/{MARK}"


def test_redacting_twice_changes_nothing_more() -> None:
    text = f"Authorization: Bearer {KEY} ?token=abc {KEY[:10]}"
    once = redact(text, SECRETS)
    assert redact(once, SECRETS) == once and KEY[:8] not in once


def test_short_and_blank_values_are_no_secrets() -> None:
    assert secrets_of([None, "", "   ", "abc"]) is NO_SECRETS
    assert redact("abc def", secrets_of(["abc"])) == "abc def"


def test_the_alert_urls_give_their_password_query_values_and_long_ids() -> None:
    cfg = AlertsConfig(
        urls=[
            "https://bot:pw-Alerts-9@chat.example/services/T0AB12CD3/hook-1234567890abcdef?sig=QsIg98765x&n=1",
            "https://n8n.example/webhook/6f1c2a3b-0d4e-4f5a-9b6c-7d8e9f0a1b2c",
        ]
    )
    found = cfg.secrets()
    assert "pw-Alerts-9" in found and "QsIg98765x" in found
    assert "hook-1234567890abcdef" in found and "6f1c2a3b-0d4e-4f5a-9b6c-7d8e9f0a1b2c" in found
    assert "services" not in found and "webhook" not in found and "1" not in found
