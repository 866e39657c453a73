"""compat-0.4.15 §10: laya.email cut rules, budget as a slice, email_state keys (every [V] example)."""

import pytest

import laya.presets
from laya.email import clean_email_body, email_questions, email_state


@pytest.mark.parametrize("body, expected", [
    ("Hi,\nmy card was charged twice for order 5521.\nCan you refund one of them?\n\nThanks,\nMaría\n\n"
     "On Tue, 3 Sep 2024 at 10:02, Support <help@shop.example> wrote:\n> We received your request.",
     "Hi,\nmy card was charged twice for order 5521.\nCan you refund one of them?"),
    ("Olá,\npreciso da segunda via do boleto.\n\nAtenciosamente,\nJoão Silva\nEnviado do meu iPhone",
     "Olá,\npreciso da segunda via do boleto."),
    ("Bonjour,\nje n'arrive pas à me connecter.\n\nCordialement\n\n"
     "Le lun. 2 sept. 2024 à 09:15, Service <aide@site.example> a écrit :\n> Merci",
     "Bonjour,\nje n'arrive pas à me connecter."),
    ("Please cancel my subscription today.\nSent from my iPhone by mistake.",
     "Please cancel my subscription today.\nSent from my iPhone by mistake."),
    ("Please cancel my subscription today.\nSent from my iPhone", "Please cancel my subscription today."),
    ("My account is locked\nThis email and any attachments are confidential and intended solely for the addressee.",
     "My account is locked"),
    ("Need help with the export.\nRegards, Łukasz", "Need help with the export."),
    ("Need help with the export.\nThanks for the quick reply yesterday.",
     "Need help with the export.\nThanks for the quick reply yesterday."),
    ("Need help\nFrom: Maria Souza\nSent: Monday\nSubject: old", "Need help"),
])
def test_published_examples(body, expected):
    assert clean_email_body(body) == expected


def test_budget_is_a_slice():
    assert clean_email_body("abcdef", 0) == ""
    assert clean_email_body("abcdefghijkl", -1) == "abcdefg"  # pre-cut [: -4], then [: -1]
    assert len(clean_email_body("x" * 10000)) == 3000
    assert clean_email_body("abcdef", 3) == "abc"
    assert clean_email_body(None) == ""


def test_line_breaks_and_quotes():
    assert clean_email_body("one\r\ntwo\rthree\\nfour") == "one\ntwo\nthree\nfour"
    assert clean_email_body("> quoted\nreal text\n  > also quoted") == "real text"
    assert clean_email_body("> only a quote") == ""  # no fallback to the original text
    # a header on the first kept line does not cut (nothing kept yet)
    assert clean_email_body("On Monday 3 we spoke, you wrote:\nplease call") == \
        "On Monday 3 we spoke, you wrote:\nplease call"


@pytest.mark.parametrize("header", [
    "-----Original Message-----", "--Forwarded Message--", "-----Mensagem original-----",
    "--- Mensaje reenviado ---", "----- Message d'origine -----", "________", "From: Shop <s@x.example>",
    "De : Boutique <b@x.example>", "Em 3 de set. de 2024, Ana escreveu:", "El 3 sept 2024, Ana escribió:",
    "Le 3 sept. 2024, Ana a écrit:",
])
def test_quote_headers_cut(header):
    assert clean_email_body(f"Please help.\n{header}\nold text") == "Please help."


def test_headers_that_need_more():
    # the Romance attributions need a digit; a bare From: needs a Sent:/dated Date: line after it
    assert clean_email_body("Please help.\nEm breve, Ana escreveu:\nmore") == "Please help.\nEm breve, Ana escreveu:\nmore"
    assert clean_email_body("Please help.\nFrom: Ana\nDate: 3 Sep 2024\nold") == "Please help."
    assert clean_email_body("Please help.\nFrom: Ana\nDate: Monday\nold") == "Please help.\nFrom: Ana\nDate: Monday\nold"
    assert clean_email_body("Please help.\nDe: Ana\nEnviado em: segunda\nold") == "Please help."
    assert clean_email_body("Please help.\n_______\nold") == "Please help.\n_______\nold"  # 7 underscores


def test_wrapped_attribution_tail_removes_its_head():
    text = "Short answer.\nOn Tue, 2 Jan 2024 at 09:00, Ann Lee <\nann@example.com> wrote:\n> old"
    assert clean_email_body(text) == "Short answer."


@pytest.mark.parametrize("line", [
    "Best regards,", "Kind regards", "Thanks, María", "Thank you so much!", "Cheers, Ann Lee", "--",
    "Thanks, Дмитрий", "Many thanks in advance", "Thanks - Ann", "Best regards, J.R.R. Tolkien", "Thanks!!", "Muito obrigado pela atenção.", "Un saludo cordiales",
    "Bien cordialement", "Merci d'avance", "Sent from my iPhone 15 Pro Max", "Enviado desde mi móvil",
    "Envoyé de mon iPad", "Get Outlook for iOS", "Sent from Mail for Windows",
    "Sent from my Samsung Galaxy smartphone.", "Sent from my Android using Gmail",
])
def test_signature_and_footer_lines_cut(line):
    assert clean_email_body(f"The export fails.\n{line}\nAnn") == "The export fails."


@pytest.mark.parametrize("line", [
    "Thanks for the reply", "Thanks, but it still fails", "Best of all it works now", "Sent from my desk",
    "Regards to your team and family members", "Thanksgiving plans", "Thanks, Ann Lee Smith Jones",
])
def test_lines_that_are_not_sign_offs(line):
    text = f"The export fails.\n{line}"
    assert clean_email_body(text) == text


def test_sign_off_only_in_the_lower_part():
    # 20 lines: the cut starts at index max(1, min(12, 12)) = 12, so an early "Thanks," stays
    lines = ["line %d" % i for i in range(20)]
    lines[3] = "Thanks,"
    assert clean_email_body("\n".join(lines)) == "\n".join(lines)
    lines[15] = "Thanks,"
    assert clean_email_body("\n".join(lines)) == "\n".join(lines[:15])


@pytest.mark.parametrize("disclaimer", [
    "If you received this message in error, please delete it.",
    "This message is confidential and may be privileged.",
    "Esta mensagem é confidencial e destinada apenas ao destinatário.",
    "Si usted ha recibido este mensaje por error, bórrelo.",
    "Antes de imprimir, pense no meio ambiente.",
    "Ce message est confidentiel.",
])
def test_disclaimers_removed(disclaimer):
    assert clean_email_body(f"Invoice attached.\n\n{disclaimer}") == "Invoice attached."


def test_disclaimer_sentences_inside_a_paragraph_and_bare_words_kept():
    text = "Please review. This email is confidential and intended only for the recipient. Call me."
    assert clean_email_body(text) == "Please review. Call me."
    assert clean_email_body("Is this confidential?") == "Is this confidential?"


def test_whitespace_tidy():
    assert clean_email_body("  Hello   there \t x  \n\n\n\nsecond  ") == "Hello there x\n\nsecond"


def test_email_state_published_shape():
    state = email_state("  Refund  ", "Please refund.\nSent from my Android", sender="ana@x.example",
                        thread_id=None, ticket=7)
    assert state == {"subject": "Refund", "body": "Please refund.", "from": "ana@x.example", "ticket": 7}
    assert list(state) == ["subject", "body", "from", "ticket"]
    assert email_state(None, None) == {"subject": "", "body": ""}
    assert email_state("s", "raw  body", clean=False) == {"subject": "s", "body": "raw  body"}
    assert email_state("s", "x" * 50, max_chars=10)["body"] == "x" * 10
    assert "from" not in email_state("s", "b", sender="")
    assert email_state("s", "b", to="a@x.example")["to"] == "a@x.example"


def test_email_state_refuses_non_strings():
    for kwargs in ({"subject": 3, "body": "b"}, {"subject": "s", "body": 3}, {"subject": "s", "body": "b", "sender": 1}):
        with pytest.raises(TypeError):
            email_state(**kwargs)


def test_email_questions_is_the_preset():
    assert email_questions is laya.presets.email_questions
