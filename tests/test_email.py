"""laya.email: clean_email_body rules and email_state (the state email_questions reads)."""

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


def test_interleaved_reply_keeps_answers_and_wrapped_attribution():
    text = ("Short answer below.\n\nOn Tue, 2 Jan 2024 at 09:00, Ann Lee <\nann@example.com> wrote:\n"
            "> Can you send the file?\n\nYes, attached.\n\n-- \nBob\nbob@x.com")
    assert clean_email_body(text) == "Short answer below.\n\nYes, attached."


@pytest.mark.parametrize("text, expected", [
    ("The server is down again.\n\n-- \nAnn Lee\nOps", "The server is down again."),
    ("The server is down again.\n--\nAnn", "The server is down again."),
    ("The server is down again.\n\nBest regards,\nAnn Lee\nHead of Ops\nACME", "The server is down again."),
    ("Das Login geht nicht.\n\nMit freundlichen Grüßen\nAnna", "Das Login geht nicht."),
    ("Please cancel my order.\n\nSent from my iPhone", "Please cancel my order."),
])
def test_signature_removed(text, expected):
    assert clean_email_body(text) == expected


def test_sign_off_words_inside_the_message_are_kept():
    text = ("Thank you for the quick reply, but the problem persists.\nThanks\n"
            + "\n".join(f"step {i} still fails" for i in range(8)))
    assert clean_email_body(text) == text  # 8 lines after "Thanks": not a signature
    assert clean_email_body("Thanks!") == "Thanks!"  # nothing above a closing: it is the message


def test_forwarded_headers_removed_content_kept():
    text = ("FYI, see below.\n\n---------- Forwarded message ---------\nFrom: Bank <no-reply@bank.com>\n"
            "Date: Mon, 1 Jan 2024\nSubject: Verify your account\nTo: me@x.com\n\n"
            "Click here to verify your password now.\n\nRegards,\nBank Team")
    assert clean_email_body(text) == "FYI, see below.\n\nClick here to verify your password now."
    apple = "Begin forwarded message:\n\nFrom: A <a@b.c>\nSubject: hi\n\nLunch at noon?"
    assert clean_email_body(apple) == "Lunch at noon?"


def test_outlook_thread_cut():
    text = ("Please cancel my order.\r\n\r\n-----Original Message-----\r\nFrom: Shop\r\nSent: Monday\r\nTo: me\r\n"
            "Subject: Order\r\n\r\nYour order shipped.")
    assert clean_email_body(text) == "Please cancel my order."
    text = "Please cancel.\n\n" + "_" * 32 + "\nFrom: Shop <s@x.com>\nSent: Monday\nTo: me\nSubject: RE: order\n\nold"
    assert clean_email_body(text) == "Please cancel."
    bare = "Please cancel.\n\nFrom: Shop <s@x.com>\nSent: Monday\nTo: me\nSubject: RE: order\n\nold"
    assert clean_email_body(bare) == "Please cancel."


def test_whitespace_and_deterministic():
    text = "\n\n  Hello\u00a0 there  \r\n\r\n\r\n\r\nsecond\u200b line \t\n\n"
    assert clean_email_body(text) == "Hello there\n\nsecond line"
    assert clean_email_body(REPLY) == clean_email_body(REPLY)


def test_nothing_left_falls_back_to_the_text():
    assert clean_email_body("> only a quote\n>   nothing else") == "> only a quote\n> nothing else"
    assert clean_email_body("") == ""
    assert clean_email_body("To: whom it may concern\nI need help.") == "To: whom it may concern\nI need help."


def test_clean_email_body_types():
    assert clean_email_body(b"caf\xc3\xa9 -- ok") == "café -- ok"
    with pytest.raises(TypeError):
        clean_email_body(None)


def test_email_state_keys():
    assert state_field(email_questions()) == "body"
    assert email_state(body="hi") == {"body": "hi"}
    assert email_state() == {"body": ""}
    s = email_state(subject="  Invoice \n wrong ", body=REPLY, sender="john@acme.com", to=["a@x.com", "b@x.com"])
    assert list(s) == ["sender", "to", "subject", "body"]
    assert s == {"sender": "john@acme.com", "to": "a@x.com, b@x.com", "subject": "Invoice wrong",
                 "body": clean_email_body(REPLY)}
    assert email_state(body=REPLY, clean=False)["body"] == REPLY
    assert list(email_state(subject="x", body="y")) == ["subject", "body"]
    with pytest.raises(TypeError):
        email_state(subject=3)
    with pytest.raises(TypeError):
        email_state(to=[1])


def test_email_state_with_the_preset(agent):
    state = email_state(subject="Refund", body=REPLY, sender="john@acme.com")
    r = agent.predict(state, email_questions())
    assert list(r["answers"]) == list(email_questions())


def test_an_early_thanks_never_cuts_the_request():
    text = ("Hi team,\n\nThanks!\n\nI was charged twice for my subscription.\nPlease refund the second charge."
            "\n\nBest,\nAnn")
    assert clean_email_body(text) == ("Hi team,\n\nThanks!\n\nI was charged twice for my subscription.\n"
                                      "Please refund the second charge.")
    assert "crashes" in clean_email_body("Hi,\nThank you.\nThe app crashes every time I open my invoices page.")
