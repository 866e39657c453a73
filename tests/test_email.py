"""laya.email: clean_email_body rules and email_state (the state email_questions reads).

The cut rules follow compat-0.4.15 §10 (the published ones); tests/test_compat_email.py has every
published example. Assertions here that pinned the earlier rules (German sign-offs, forwarded text kept,
the fall-back to the original text, the "early Thanks never cuts" rule) now pin the published ones.
"""

import pytest

from laya.email import clean_email_body, email_state
from laya.presets import email_questions, state_field

REPLY = ("Hi team,\n\nMy invoice   is wrong,\tplease fix it.\n\n\n\nThanks,\nJohn Doe\nACME Corp\n+1 555 1234\n\n"
         "On Mon, Jan 1, 2024 at 10:00 AM Support <support@x.com> wrote:\n> Dear John,\n> we received your request.\n"
         ">\n> Best")


def test_quoted_reply_removed():
    out = clean_email_body(REPLY)
    assert out == "Hi team,\n\nMy invoice is wrong, please fix it."
    assert ">" not in out and "wrote:" not in out and "received your request" not in out


def test_wrapped_attribution_cuts_the_rest():
    # published: the thread ends the message at the first quote header (no interleaved answers kept)
    text = ("Short answer below.\n\nOn Tue, 2 Jan 2024 at 09:00, Ann Lee <\nann@example.com> wrote:\n"
            "> Can you send the file?\n\nYes, attached.\n\n-- \nBob\nbob@x.com")
    assert clean_email_body(text) == "Short answer below."


@pytest.mark.parametrize("text, expected", [
    ("The server is down again.\n\n--\nAnn Lee\nOps", "The server is down again."),
    ("The server is down again.\n--\nAnn", "The server is down again."),
    ("The server is down again.\n\nBest regards,\nAnn Lee\nHead of Ops\nACME", "The server is down again."),
    ("Please cancel my order.\n\nSent from my iPhone", "Please cancel my order."),
])
def test_signature_removed(text, expected):
    assert clean_email_body(text) == expected


def test_unlisted_languages_keep_their_sign_off():
    # the published sign-offs are English, Portuguese, Spanish and French only
    assert clean_email_body("Das Login geht nicht.\n\nMit freundlichen Grüßen\nAnna") == \
        "Das Login geht nicht.\n\nMit freundlichen Grüßen\nAnna"


def test_sign_off_words_inside_the_message_are_kept():
    text = "Thank you for the quick reply, but the problem persists.\n" + "\n".join(f"step {i} fails" for i in range(8))
    assert clean_email_body(text) == text
    assert clean_email_body("Thanks!") == "Thanks!"  # line 0 is never a sign-off


def test_forward_marker_cuts_the_rest():
    text = ("FYI, see below.\n\n---------- Forwarded message ---------\nFrom: Bank <no-reply@bank.com>\n"
            "Date: Mon, 1 Jan 2024\nSubject: Verify your account\n\nClick here to verify your password now.")
    assert clean_email_body(text) == "FYI, see below."


def test_outlook_thread_cut():
    text = ("Please cancel my order.\r\n\r\n-----Original Message-----\r\nFrom: Shop\r\nSent: Monday\r\nTo: me\r\n"
            "Subject: Order\r\n\r\nYour order shipped.")
    assert clean_email_body(text) == "Please cancel my order."
    text = "Please cancel.\n\n" + "_" * 32 + "\nFrom: Shop <s@x.com>\nSent: Monday\nTo: me\nSubject: RE: order\n\nold"
    assert clean_email_body(text) == "Please cancel."
    bare = "Please cancel.\n\nFrom: Shop <s@x.com>\nSent: Monday\nTo: me\nSubject: RE: order\n\nold"
    assert clean_email_body(bare) == "Please cancel."


def test_whitespace_and_deterministic():
    text = "\n\n  Hello  there  \r\n\r\n\r\n\r\nsecond\t line \t\n\n"
    assert clean_email_body(text) == "Hello there\n\nsecond line"
    assert clean_email_body(REPLY) == clean_email_body(REPLY)


def test_nothing_left_is_empty():
    assert clean_email_body("> only a quote\n>   nothing else") == ""
    assert clean_email_body("") == ""
    assert clean_email_body("To: whom it may concern\nI need help.") == "To: whom it may concern\nI need help."


def test_clean_email_body_types():
    assert clean_email_body(b"caf\xc3\xa9 -- ok") == "café -- ok"
    assert clean_email_body(None) == ""
    with pytest.raises(TypeError):
        clean_email_body(3)


def test_email_state_keys():
    assert state_field(email_questions()) == "body"
    assert email_state(None, "hi") == {"subject": "", "body": "hi"}
    s = email_state("  Invoice wrong ", REPLY, sender="john@acme.com", to="a@x.com, b@x.com")
    assert list(s) == ["subject", "body", "from", "to"]
    assert s == {"subject": "Invoice wrong", "body": clean_email_body(REPLY), "from": "john@acme.com",
                 "to": "a@x.com, b@x.com"}
    assert email_state("s", REPLY, clean=False)["body"] == REPLY
    with pytest.raises(TypeError):
        email_state(3, "b")


def test_email_state_with_the_preset(agent):
    state = email_state("Refund", REPLY, sender="john@acme.com")
    r = agent.predict(state, email_questions())
    assert list(r["answers"]) == list(email_questions())


def test_an_early_thanks_in_a_short_message_cuts():
    # published rule: the signature scan starts at line max(1, min(0.6n, n - 8)), so in a 9-line message
    # a "Thanks!" on line 2 starts the signature
    text = ("Hi team,\n\nThanks!\n\nI was charged twice for my subscription.\nPlease refund the second charge."
            "\n\nBest,\nAnn")
    assert clean_email_body(text) == "Hi team,"
    assert "crashes" in clean_email_body("Hi,\nThank you.\nThe app crashes every time I open my invoices page.\n"
                                         + "\n".join(f"detail {i}" for i in range(10)))
