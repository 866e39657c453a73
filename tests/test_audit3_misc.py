"""Audit 3 pins for §8-§11 of compat-0.4.15.md that earlier tests left open: e-mail header and footer
rules, abstention/record validation texts, hook timeout parsing and the CLI's interactive exit code.
(No fix was needed; these hold the verified behaviour in place.)"""

from __future__ import annotations

import io

import pytest

from laya import cli
from laya.calibrate import check_records, fit_abstention_thresholds, fit_binning_map
from laya.email import clean_email_body
from laya.hooks import OptionStabilityHook, PredictContext, validate_timeout

HEAD = "Hello team,\nthe invoice is wrong."


# ---- R-EM-1 step 3: quote headers ---------------------------------------------------------------------

@pytest.mark.parametrize("header", [
    "Em seg., 2 de set. de 2024 às 10:00, Ana <a@b.example> escreveu:",
    "El lun, 2 sept 2024, Ana escribio:",
    "Le lun. 2 sept. 2024, Ana a écrit:",
    "-- Forwarded message --",
    "----- Mensagem encaminhada -----",
    "________",
    "De : Ana ana@x.example",
])
def test_quote_headers_cut_the_thread(header):
    assert clean_email_body(f"{HEAD}\n{header}\nold text") == HEAD


def test_romance_attribution_needs_a_digit_and_underscores_need_eight():
    for line in ("Em algum dia Ana escreveu:", "_______"):
        body = f"{HEAD}\n{line}\nold text"
        assert clean_email_body(body) == body


@pytest.mark.parametrize("second, cut", [
    ("Fecha: 2 de sept 2024", True), ("Fecha: lunes", False), ("Enviado em: segunda", True),
    ("Envoyé le : lundi", True)])
def test_bare_from_line_is_a_header_only_before_a_sent_or_dated_line(second, cut):
    body = f"{HEAD}\nDe: Ana\n{second}\nold text"
    assert clean_email_body(body) == (HEAD if cut else body)


def test_wrapped_tail_drops_the_dated_attribution_head_only():
    assert clean_email_body(f"{HEAD}\nOn Tue, 3 Sep 2024, Support\n<help@shop.example> wrote:\nold") == HEAD
    assert clean_email_body(f"{HEAD}\nSome line\n<help@shop.example> wrote:\nold") == f"{HEAD}\nSome line"


# ---- R-EM-1 step 4: sign-offs and device footers -------------------------------------------------------

@pytest.mark.parametrize("tail", [
    "Sent from my iPhone 15 Pro Max", "Sent from Yahoo Mail for iPhone", "Sent from my iPhone using Tapatalk",
    "Enviado desde mi móvil", "Envoyé de mon iPhone", "Obter o Outlook para Android",
    "Obrigado pela atenção.", "Muchas gracias de antemano!", "Merci d'avance", "Best regards, Ann Marie Smith"])
def test_sign_offs_and_footers_are_cut(tail):
    assert clean_email_body(f"{HEAD}\n{tail}") == HEAD


def test_four_name_tokens_are_not_a_sign_off():
    body = f"{HEAD}\nBest regards, Ann Marie Smith Jones"
    assert clean_email_body(body) == body


# ---- R-CAL-4 / R-CAL-5: validation texts ---------------------------------------------------------------

RECORDS = [(0, [2.0, 0.0], [1, 0]), (0, [0.0, 1.0], [1, 0]), (0, [3.0, 0.0], [1, 0], 2)]


@pytest.mark.parametrize("value", [0, 2.5, float("nan"), float("inf"), True])
def test_min_bucket_n_refusals(value):
    with pytest.raises(ValueError, match=r"^min_bucket_n must be a positive integer, got "):
        fit_abstention_thresholds(RECORDS, [1, 1, 1], None, min_bucket_n=value)
    with pytest.raises(ValueError, match=r"^min_bucket_n must be a positive integer, got "):
        fit_binning_map(RECORDS, [1, 1, 1], None, min_bucket_n=value)


def test_abstention_cut_conservative_and_plain():
    assert fit_abstention_thresholds(RECORDS, [1, 1, 1], None, min_bucket_n=3) == {"choice:2": 1.0}
    assert fit_abstention_thresholds(RECORDS, [1, 1, 1], None, min_bucket_n=3, conservative=False,
                                     target_error=0.5) == {"choice:2": 0.7311}
    assert fit_abstention_thresholds(RECORDS, [1, 1, 1], None, min_bucket_n=4) == {}


@pytest.mark.parametrize("record, text", [
    ((True, [1, 0], [1, 0]), "qtype must be an integer between 0 and 2"),
    ((0, [1, 0], [1, 0], None), "k must be an integer between 1 and the vector length"),
    ((0, [1, 0], [1, 0], 3), "k must be an integer between 1 and the vector length"),
    ((0, [[1, 0]], [1, 0]), "logits must be a one-dimensional numeric vector"),
    ((0, [1, 0], [1, float("inf")]), "target must contain only finite values"),
    ((0, [1, 0], [0.5, 0.4]), "target must be a nonnegative probability vector summing to 1"),
    ((0, [1]), r"record must be \(qtype, logits, target\[, k\]\)")])
def test_record_refusals(record, text):
    with pytest.raises(ValueError, match="^" + text):
        check_records([record])


# ---- R-HK-3 / R-HK-6 ---------------------------------------------------------------------------------

def test_timeout_string_is_read_as_seconds():
    assert validate_timeout("0.5") == 0.5
    with pytest.raises(ValueError, match=r"^hooks_timeout must be a positive finite number or None; got -1$"):
        validate_timeout(-1)


def test_parallel_layout_without_relabel_gets_a_blank_reliability_block():
    class Agent:
        cfg = {"option_layout": "parallel"}

    questions = {"team": {"type": "choice", "instructions": "Which team?", "criteria": ["billing", "tech"]}}
    hook = OptionStabilityHook(accept=0.5, escalate=None, relabel=False)
    ctx = PredictContext(states=["s"], questions=questions, agent=Agent())
    hook.on_predict_start(ctx)
    assert list(ctx.questions) == ["team"]
    ctx.results = [{"answers": {"team": {"type": "choice", "choice": "tech",
                                         "probabilities": {"billing": 0.1, "tech": 0.9}}}}]
    hook.on_predict_end(ctx)
    block = ctx.results[0]["answers"]["team"]["reliability"]
    assert block["probes"] == [] and block["option_layout"] == "parallel" and block["decision"] is None
    assert [block[k] for k in ("soft_stability", "stability", "reorder_stability", "rename_stability")] == [None] * 4


# ---- R-CLI-6: interactive mode ------------------------------------------------------------------------

def test_interactive_keeps_going_after_failures_and_exits_2(monkeypatch, capsys):
    class Router:
        calls = 0

        def route(self, state, **kwargs):
            Router.calls += 1
            if Router.calls == 1:
                raise ValueError("bad thing")
            if Router.calls == 2:
                raise RuntimeError("boom")
            return {"model": "english", "reason": "explicit"}

    monkeypatch.setattr(cli, "make_router", lambda args: Router())
    monkeypatch.setattr("sys.stdin", io.StringIO("one\ntwo\nthree\n"))
    assert cli.main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == "laya> laya> laya> Model     : english\nReason    : explicit\nlaya> "
    assert captured.err.splitlines()[:2] == ["laya: bad thing", "laya: could not run Laya (boom)."]
