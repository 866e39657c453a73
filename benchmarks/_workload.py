"""The questions benchmarks ask: one ticket-triage pool, so that their figures describe the same work."""

from __future__ import annotations

TICKET_QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something is broken",
                            "billing": "a question about a charge", "other": None}},
    "urgency": {"type": "score", "instructions": "How urgent is this ticket?",
                "criteria": ["can wait", "this week", "today", "right now"]},
    "refund": {"type": "noul", "instructions": "The customer asks for a refund."},
    "sentiment": {"type": "choice", "instructions": "Overall tone of the message?",
                  "criteria": ["positive", "neutral", "negative"]},
    "team": {"type": "choice", "instructions": "Which team should handle it?",
             "criteria": ["billing", "technical", "account", "shipping"]},
    "escalate": {"type": "noul", "instructions": "A manager must step in.",
                 "criteria": {"true": "escalate now", "false": "support can handle it"}},
    "anger": {"type": "score", "instructions": "How angry is the writer?",
              "criteria": ["calm", "annoyed", "angry", "furious"]},
    "language": {"type": "choice", "instructions": "Which language is the message in?",
                 "criteria": ["english", "german", "spanish", "other"]},
    "churn": {"type": "noul", "instructions": "The customer threatens to cancel the plan."},
    "priority": {"type": "choice", "instructions": "Ticket priority?",
                 "criteria": {"p1": "outage", "p2": "major problem", "p3": "minor problem"}},
}


def ticket_questions(k: int) -> dict:
    """The first `k` questions of the pool (choice, score and noul mixed from the start)."""
    if not 1 <= k <= len(TICKET_QUESTIONS):
        raise ValueError(f"between 1 and {len(TICKET_QUESTIONS)} questions, got {k}")
    return dict(list(TICKET_QUESTIONS.items())[:k])
