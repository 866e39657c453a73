"""laya-mini, the trained checkpoint inside the package: it loads offline and really decides.

The cases are short texts in the style it was trained for, worded afresh (none is a training string).
A random-weight checkpoint gets each choice right with probability 1/4-1/5 and each yes/no or score case
with about 1/2, so all of them passing by chance is below one in a million.
"""

import json
import os

import pytest

import laya
from laya.registry import LAYA_MINI

INTENT = {"type": "choice", "instructions": "What does the customer want?",
          "criteria": {"refund": "money back for a purchase", "bug": "something is broken or crashes",
                       "shipping": "where is my parcel", "cancel": "close the account"}}
PHISHING = {"type": "noul", "instructions": "Is this email a phishing attempt?"}
SPECIALIST = {"type": "choice", "instructions": "Which specialist should answer the request?",
              "criteria": ["coding", "math", "translation", "legal", "medical"]}
URGENCY = {"type": "score", "instructions": "How urgent is this message?",
           "criteria": ["can wait", "this week", "today", "right now"]}

CHOICES = [
    ({"message": "The app crashes every time I try to upload a photo, please fix it."}, INTENT, "bug"),
    ({"message": "My parcel was supposed to arrive on Monday and the tracking page has not moved since."}, INTENT,
     "shipping"),
    ({"message": "I returned the jacket two weeks ago, please send my money back."}, INTENT, "refund"),
    ({"message": "Please close my account and stop my subscription at the end of the month."}, INTENT, "cancel"),
    ({"request": "Translate this paragraph into German for our brochure."}, SPECIALIST, "translation"),
    ({"request": "Why does my Python loop throw an IndexError on the last element?"}, SPECIALIST, "coding"),
]
YES_NO = [
    ({"email": "Verify your password now at this link or your mailbox will be deleted within 24 hours."}, True),
    ({"email": "Hi Sam, can we move our weekly sync to Thursday at 3pm?"}, False),
]
SCORES = [
    ({"message": "Production is down for every customer, we need help right now!"}, "high"),
    ({"message": "No rush at all, whenever you have a spare moment next month."}, "low"),
]


@pytest.fixture(scope="module")
def mini():
    return laya.load(LAYA_MINI, device="cpu")


def test_it_is_the_trained_minilm_checkpoint():
    with open(os.path.join(LAYA_MINI, "rl_agent_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    assert cfg["encoder"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert cfg["note"].startswith("laya-mini:")
    assert cfg["training"]["laya_train"]["steps"] > 1000  # trained, not a fresh head
    assert os.path.getsize(os.path.join(LAYA_MINI, "model.safetensors")) < 50 * 2**20  # the size cap


@pytest.mark.parametrize("state,question,expected", CHOICES)
def test_choice(mini, state, question, expected):
    answer = mini.predict(state, {"q": question})["answers"]["q"]
    assert answer["choice"] == expected
    assert answer["probabilities"][expected] > 0.5


def test_choice_does_not_depend_on_option_order(mini):
    state, question, expected = CHOICES[0]
    flipped = dict(question, criteria=dict(reversed(list(question["criteria"].items()))))
    assert mini.predict(state, {"q": flipped})["answers"]["q"]["choice"] == expected


@pytest.mark.parametrize("state,truth", YES_NO)
def test_yes_no(mini, state, truth):
    p_true = mini.predict(state, {"q": PHISHING})["answers"]["q"]["noul"]
    assert (p_true > 0.5) == truth


@pytest.mark.parametrize("state,level", SCORES)
def test_score(mini, state, level):
    score = mini.predict(state, {"q": URGENCY})["answers"]["q"]["score"]  # expected level on 0..3
    assert score >= 2 if level == "high" else score <= 1


def test_batch_gives_the_single_answers(mini):
    states = [s for s, _, _ in CHOICES[:4]]
    batch = mini.predict_batch(states, {"q": INTENT}, batch_size=3, sort_by_length=True)
    assert [r["answers"]["q"]["choice"] for r in batch] == [e for _, _, e in CHOICES[:4]]
    single = mini.predict(states[1], {"q": INTENT})["answers"]["q"]["probabilities"]
    assert batch[1]["answers"]["q"]["probabilities"] == single
