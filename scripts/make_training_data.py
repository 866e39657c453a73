"""A typed-decision dataset (choice / score / noul) that regenerates exactly from a seed.

    python scripts/make_training_data.py OUT_DIR [--seed 0] [--train 6000] [--heldout 900] [--calib 3000]

Writes OUT_DIR/train.jsonl, OUT_DIR/heldout.jsonl and OUT_DIR/calib.jsonl in the laya.train
gold-probability format (`{"state", "questions", "gold": {qid: {"probabilities": {...}}}, "meta"}`), one
question per record.

Six domains (support tickets, emails, moderation, security events, agent traces, routing requests),
each with concepts, severity cues and statements. Every string pool is split in two: the training
split draws label names, label descriptions, evidence phrasings, state templates and instruction
phrasings from the first part, the held-out split ONLY from the last part, so held-out label sets and
templates never occur in training. States carry distractors (a second, negated or past concept) and
noul statements are negated about half of the time.

Calibration split (calib.jsonl): temperatures and abstention thresholds must be fitted on data as unseen
as the evaluation's. The calib split draws every string from pools of its own (CALIB_* below: a label
name, description and evidence phrasing per concept, score cues and level sets, instructions, distractor
and negation frames, N_CALIB_TEMPLATES state templates), written in the generator's style and disjoint
from both other splits; like the held-out split it has no lexical hints and no bare-code labels, and its
records come from their own seeded stream (`random.Random(f"{seed}:calib")`). No string is taken from the
training pools, so checkpoints trained before the calib split existed have not seen it either, and the
training and held-out splits are byte-identical to before for the same seed and sizes.
Importable: `make_dataset(seed, n_train, n_heldout) -> (train_records, heldout_records)` and
`make_splits(seed, n_train, n_heldout, n_calib) -> {"train", "heldout", "calib"}`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys

# concept: (labels "a|b|HELD", descriptions "a|HELD", evidence "a|b|HELD", noul statement)
# The last alternative of every "|" list is reserved for the held-out split.
DOMAINS = {
    "support": {
        "key": "message",
        "concepts": {
            "refund": ("refund|money_back|reimbursement", "they ask for their money back|the customer wants the payment returned",
                       "please refund my last order|I want my money back for this purchase|kindly return the amount you took from my card",
                       "ask for a refund"),
            "bug": ("technical_issue|bug|malfunction", "something is broken or fails|the product does not work as it should",
                    "the app crashes every time I open it|the export button throws an error|the screen freezes and nothing loads after the update",
                    "report something broken"),
            "billing": ("billing_question|invoice|charges", "a question about a charge or invoice|they are confused about what they were billed",
                        "why is there an extra fee on my invoice|I do not understand the amount on my statement|what is this charge of 40 dollars on my bill",
                        "ask about a charge or invoice"),
            "cancel": ("cancellation|cancel_account|churn", "they want to end their subscription|the customer wants to close the account",
                       "please cancel my subscription|I want to close my account for good|stop my plan at the end of this month, I am leaving",
                       "want to cancel"),
            "login": ("account_access|login_problem|sign_in", "they cannot get into their account|the person is locked out",
                      "I cannot log in, my password is rejected|the reset link never arrives and I am locked out|my sign-in code does not work any more",
                      "have trouble logging in"),
            "shipping": ("delivery|shipping|order_status", "a question about where an order is|the parcel is late or missing",
                         "my package has not arrived yet|the tracking number shows no movement|the courier says delivered but nothing came",
                         "ask about a delivery"),
            "feature": ("feature_request|suggestion|product_idea", "they ask for something new in the product|the user proposes an improvement",
                        "it would be great if you added dark mode|could you please support exporting to CSV|I wish the calendar could sync with my phone",
                        "ask for a new feature"),
        },
    },
    "email": {
        "key": "body",
        "concepts": {
            "meeting": ("meeting|scheduling|calendar", "setting up or moving a meeting|arranging a time to meet",
                        "can we move our call to Thursday at 3pm|are you free for a meeting next week|let us find a slot to meet on Monday morning",
                        "try to schedule a meeting"),
            "phishing": ("phishing|credential_theft|scam", "it tries to steal passwords or money|a fake message asking for secrets",
                         "verify your account now by entering your password at this link|your mailbox is full, confirm your login details here|send the wire today, I am the CEO and cannot talk by phone",
                         "try to steal credentials or money"),
            "newsletter": ("newsletter|marketing|promotion", "bulk promotional mail|an advertisement sent to many people",
                           "big summer sale, 50 percent off everything this weekend|our monthly newsletter is here with new offers|unsubscribe below, limited time discount inside",
                           "advertise something"),
            "invoice_mail": ("payment_due|accounts_payable|vendor_invoice", "a supplier asks to be paid|an invoice that needs payment",
                             "attached is invoice 2231, due in 14 days|a reminder that payment for March is overdue|please settle the outstanding balance for our services",
                             "ask to be paid"),
            "job": ("recruiting|job_application|hiring", "about applying for or filling a job|a candidate or recruiter writes",
                    "I am applying for the data analyst position|please find my CV attached for the opening|we would like to invite you to a second interview",
                    "concern a job application"),
            "complaint": ("complaint|escalation|grievance", "the sender is unhappy and wants action|an angry message about poor service",
                          "this is the third time your team ignored me|I am very disappointed with how my case was handled|your service has been unacceptable and I want a manager",
                          "complain about the service"),
        },
    },
    "moderation": {
        "key": "post",
        "concepts": {
            "harassment": ("harassment|personal_attack|bullying", "it targets a person with abuse|insults aimed at a specific user",
                           "you are a worthless idiot and everyone hates you|nobody wants you here, go away loser|keep posting and I will keep mocking you, clown",
                           "attack a person"),
            "spam_post": ("spam|advertising|junk", "advertising or repeated junk|unwanted promotion posted to the forum",
                          "buy cheap followers now at my site|click here for free crypto giveaways|best prices on watches, message me today",
                          "advertise or spam"),
            "threat": ("threat|violence|intimidation", "it threatens harm or violence|a message promising to hurt someone",
                       "I know where you live and I will hurt you|watch your back tomorrow, you will regret this|someone should beat him up after school",
                       "threaten violence"),
            "benign": ("acceptable|fine|no_violation", "a normal friendly post|nothing wrong with it",
                       "thanks for the helpful guide, it worked for me|does anyone know a good recipe for bread|great photo, where was this taken",
                       "look harmless"),
            "misinfo": ("misinformation|false_claim|hoax", "it spreads false or misleading claims|a made-up claim presented as fact",
                        "the vaccine contains microchips to track you|the moon landing was filmed in a studio|drinking bleach cures the flu, doctors hide it",
                        "spread a false claim"),
            "selfharm": ("self_harm|crisis|at_risk", "the writer may hurt themselves|someone in crisis who needs help",
                         "I do not want to be alive anymore|I have been thinking about ending it all|nothing matters and I want to disappear forever",
                         "suggest the writer may hurt themselves"),
        },
    },
    "security": {
        "key": "event",
        "concepts": {
            "bruteforce": ("brute_force|password_spraying|credential_attack", "many failed logins from one source|repeated password guessing",
                           "500 failed SSH logins from 203.0.113.7 in two minutes|repeated authentication failures for admin from one IP|a burst of wrong passwords against many accounts",
                           "show repeated password guessing"),
            "malware": ("malware|infection|trojan", "malicious software was detected|a host runs a virus",
                        "antivirus quarantined a trojan on laptop-42|an unknown binary started beaconing to a remote host|ransomware note found on the file server",
                        "involve malicious software"),
            "exfil": ("data_exfiltration|data_leak|exfil", "data is being sent out of the network|sensitive files leaving the company",
                      "12 GB uploaded to an unknown cloud bucket at night|a user copied the customer database to a USB drive|large outbound transfer to a foreign server",
                      "show data leaving the network"),
            "privesc": ("privilege_escalation|admin_abuse|elevation", "someone gained higher rights than allowed|an account became admin unexpectedly",
                        "user jdoe was added to domain admins without a ticket|a service account ran sudo to become root|a new admin role was granted by an unknown process",
                        "show someone gaining admin rights"),
            "noise": ("false_positive|benign_activity|routine", "normal activity, nothing to do|a harmless alert",
                      "scheduled backup job finished successfully|the vulnerability scanner ran its weekly scan|a user changed their own password as planned",
                      "describe routine activity"),
            "phish_click": ("phishing_click|user_compromise|lure_opened", "a user opened a malicious link|an employee fell for a lure",
                            "employee clicked a link in a fake invoice email|a user entered credentials on a spoofed login page|the mail gateway logged a click on a known bad URL",
                            "show a user falling for a phishing link"),
        },
    },
    "agent": {
        "key": "trace",
        "concepts": {
            "done": ("success|task_complete|finished", "the agent finished the task|the goal was reached",
                     "all tests passed and the pull request was opened|the file was written and verified|the booking is confirmed and the user was told",
                     "show the task finished"),
            "loop": ("stuck_loop|repetition|looping", "the agent repeats the same step|it keeps calling the same tool",
                     "called search with the same query for the fifth time|retried the same failing command again and again|the same plan was printed in every step",
                     "show the agent repeating itself"),
            "tool_error": ("tool_failure|api_error|tool_crash", "a tool call failed|an external call returned an error",
                           "the weather API returned 500 internal server error|the shell tool timed out after 60 seconds|permission denied when writing to the output directory",
                           "show a failing tool call"),
            "needs_user": ("needs_input|ask_user|clarification", "the agent needs more information from the user|it must ask the user",
                           "which account should I use, the personal or the work one|I need the date of birth to continue|the request is ambiguous, please specify the region",
                           "show the agent waiting for the user"),
            "unsafe": ("unsafe_action|policy_violation|risky_step", "the agent tried something dangerous|a step that breaks the rules",
                       "the agent attempted to delete the production database|it tried to email the customer list to an outside address|it disabled the firewall to make a test pass",
                       "show a dangerous action"),
        },
    },
    "routing": {
        "key": "request",
        "concepts": {
            "coding": ("coding|programming|software", "writing or fixing code|a software development task",
                       "write a python function that parses dates|why does my javascript loop never end|fix this segmentation fault in my C program",
                       "ask for help with code"),
            "math": ("math|calculation|arithmetic", "solving equations or computing numbers|a mathematics problem",
                     "what is the integral of x squared|solve 3x plus 5 equals 20|prove that the square root of two is irrational",
                     "ask a math question"),
            "writing": ("writing|editing|prose", "drafting or improving text|help with an essay or letter",
                        "rewrite this paragraph to sound more formal|draft a cover letter for a nursing job|make my wedding speech funnier",
                        "ask for help with writing"),
            "translation": ("translation|language|localisation", "turning text into another language|converting between languages",
                            "translate this menu into Spanish|how do you say good morning in Japanese|put this contract into German",
                            "ask for a translation"),
            "medical": ("health|medical|symptoms", "a question about health or symptoms|medical advice",
                        "I have had a headache and fever for three days|is it safe to take ibuprofen with this medication|what are the signs of a heart attack",
                        "ask about health"),
            "legal": ("legal|law|contracts", "a question about law or rights|legal advice",
                      "can my landlord keep my deposit|is this non-compete clause enforceable|how do I register a trademark",
                      "ask a legal question"),
        },
    },
}


# More training phrasings, merged into the pools above in front of their held-out last item, so the
# training split sees 3 label names, 2 descriptions and 5 evidence phrasings per concept (was 2/1/2)
# while the held-out split is unchanged: few phrasings per concept let a model memorise strings
# instead of matching state and option meaning.
# concept: (extra training labels, extra training descriptions, extra training evidence)
EXTRA = {
 "refund": (["chargeback_request"], ["the person wants a purchase paid back"],
            ["I returned the item two weeks ago and still have not been paid back", "this order was wrong, give me back what I paid", "can I get the 30 dollars back for the cancelled class"]),
 "bug": (["defect"], ["a feature is failing or giving errors"],
         ["the page shows a blank white screen when I click save", "every upload fails with error code 0x80", "the numbers in the report are wrong since yesterday's release"]),
 "billing": (["payment_query"], ["the customer questions an amount they paid"],
             ["I was charged twice this month", "the price on my receipt is higher than advertised", "which card did you bill for the annual plan"]),
 "cancel": (["unsubscribe_service"], ["the user is leaving and wants the service stopped"],
            ["I no longer need the service, please terminate it", "do not renew my membership next year", "how do I delete my account and stop all payments"]),
 "login": (["locked_out"], ["the user cannot sign into the service"],
           ["two-factor codes are not reaching my phone so I cannot get in", "it says my username does not exist", "I forgot my password and the recovery email is old"]),
 "shipping": (["parcel_tracking"], ["the customer is waiting for goods to arrive"],
              ["the box was supposed to come on Friday and it is Tuesday now", "which carrier is bringing my shoes", "the parcel was sent to my old address"]),
 "feature": (["enhancement"], ["the user wants the product to do something it cannot do yet"],
             ["please add an option to share lists with family", "a keyboard shortcut for archiving would save me time", "can you build an integration with Slack"]),
 "meeting": (["appointment"], ["the email tries to agree on a time to talk"],
             ["does 10am on Wednesday work for a quick sync", "I need to reschedule our lunch to next Friday", "please send me an invite for the review call"]),
 "phishing": (["fraud_attempt"], ["a deceptive mail trying to get logins or payments"],
              ["your package is held, pay the customs fee via this link", "security alert: click here within 24 hours or your account is closed", "I am a prince and need your bank details to move my fortune"]),
 "newsletter": (["bulk_mail"], ["a mass mailing with offers or news"],
                ["new arrivals just landed, shop the collection now", "here are this week's top deals picked for you", "join our webinar and get a free ebook"]),
 "invoice_mail": (["billing_notice"], ["a request for payment of a bill"],
                  ["the balance of 1200 euros is due by Friday", "please remit payment for order 5521 at your earliest convenience", "our records show invoice 88 is still unpaid"]),
 "job": (["career"], ["an email about a position or hiring process"],
         ["thank you for interviewing with us, here is the offer letter", "is the junior designer role still open", "I would like to refer a friend for the engineering vacancy"]),
 "complaint": (["dissatisfaction"], ["someone protests about bad treatment"],
               ["nobody has answered my calls for two weeks", "the product broke after one day and support was rude", "I demand a formal apology for how I was treated"]),
 "harassment": (["abuse"], ["hostile remarks directed at a member"],
                ["shut up, nobody cares about your stupid opinion", "everyone look at this pathetic user and laugh", "you are so ugly you should never post a photo again"]),
 "spam_post": (["self_promotion"], ["posts that sell things or repeat junk"],
               ["earn 5000 dollars a week from home, DM me", "follow my page for daily discount codes", "visit cheap-pills dot com for the best deals"]),
 "threat": (["menace"], ["words announcing harm to someone"],
            ["if I see you again I will break your legs", "you had better sleep with one eye open", "I am going to burn your house down"]),
 "benign": (["ok"], ["an ordinary post that breaks no rule"],
            ["I just finished my first marathon, so happy", "what time does the museum open on Sundays", "here is a picture of my cat sleeping"]),
 "misinfo": (["fake_news"], ["untrue statements shared as if they were real"],
             ["5G towers are spreading the virus", "the election was decided by secret voting machines in space", "eating garlic makes you immune to every disease"]),
 "selfharm": (["suicide_risk"], ["a post showing the author may be in danger"],
              ["I cut myself again last night", "everyone would be better off without me", "I have pills saved up and I am ready to use them"]),
 "bruteforce": (["login_flood"], ["a source tries many passwords"],
                ["thousands of login attempts with common passwords from a botnet", "account lockouts triggered for 40 users within a minute", "failed RDP logins from the same address every second"]),
 "malware": (["virus"], ["a machine is infected by harmful code"],
             ["EDR flagged a cryptominer running on the build server", "a macro in a Word file dropped an executable", "the endpoint connected to a known command and control domain"]),
 "exfil": (["data_theft"], ["information is being copied out without permission"],
           ["gigabytes of source code were pushed to a personal repository", "a script is uploading HR files to a paste site", "unusual DNS tunnelling traffic carrying encoded data"]),
 "privesc": (["rights_escalation"], ["an account obtained permissions it should not have"],
             ["a local user exploited a kernel bug to get SYSTEM", "someone changed the IAM policy to give themselves full access", "a contractor account was added to the owners group"]),
 "noise": (["harmless"], ["expected behaviour that needs no response"],
           ["the nightly patch job restarted the servers as scheduled", "an admin logged in from the office during working hours", "the monitoring agent was updated by IT"]),
 "phish_click": (["link_clicked"], ["an employee followed a fraudulent link"],
                 ["a staff member opened a fake shared document link and typed her password", "proxy logs show a visit to a credential harvesting site", "the finance clerk clicked the link in the fake delivery notice"]),
 "done": (["completed"], ["the run ended with the goal achieved"],
          ["the report was generated and emailed to the manager", "deployment finished and the health check is green", "the agent answered the question and closed the ticket"]),
 "loop": (["infinite_loop"], ["the agent keeps doing the same thing without progress"],
          ["opened the same web page ten times in a row", "the agent alternates between two actions forever", "it keeps asking the same clarifying question"]),
 "tool_error": (["call_failed"], ["an integration or command returned an error"],
                ["the database query failed with a syntax error", "the browser tool could not resolve the host", "the calculator tool returned NaN and an exception"]),
 "needs_user": (["awaiting_user"], ["the agent is blocked until the user answers"],
                ["should I pay with the saved card or a new one", "please confirm that I may send this email", "I could not find the file, can you tell me where it is"]),
 "unsafe": (["dangerous_action"], ["the agent did something that could cause harm"],
            ["the agent ran rm -rf on the home directory", "it shared the API keys in a public channel", "it transferred money without approval"]),
 "coding": (["code"], ["a programming question"],
            ["how do I reverse a linked list in Java", "my SQL query returns duplicate rows", "refactor this class to use dependency injection"]),
 "math": (["mathematics"], ["a question about numbers or equations"],
          ["what is 17 percent of 240", "find the derivative of sin x times x", "how many ways can 5 people sit in a row"]),
 "writing": (["copywriting"], ["a request to compose or polish text"],
             ["write a short poem about autumn", "make this email sound more polite", "summarise my essay in a catchy title"]),
 "translation": (["translate"], ["a request to render text in another language"],
                 ["what is the French word for window", "translate my resume into Italian", "how do I write thank you in Korean"]),
 "medical": (["healthcare"], ["a question about the body, illness or medicine"],
             ["my child has a rash and a high temperature", "how much vitamin D should an adult take", "is chest pain after running something to worry about"]),
 "legal": (["law_question"], ["a question about rules, rights or contracts"],
           ["can my employer fire me for being sick", "do I need a lawyer to write a will", "what happens if I break my lease early"]),
}
EXTRA_CUES = {  # dim -> per level, extra training cues
 "urgency": [["no deadline on this", "take your time"], ["by the end of the week please", "in the coming days is fine"],
             ["please get back to me this afternoon", "ideally before tonight"], ["this needs fixing in the next hour", "please prioritise this now"],
             ["production is down, all hands now", "critical outage, respond immediately"]],
 "anger": [["you have been wonderful", "thank you, all good"], ["this is a little irritating", "mildly bothered by this"],
           ["I am quite upset about this", "this is getting on my nerves"], ["I am really mad at your company", "this is outrageous"],
           ["I am beyond furious and will report you", "you are the worst, I hate this company"]],
 "impact": [["nobody is affected", "it is purely cosmetic"], ["only my own account has the problem", "just one colleague saw it"],
            ["our whole office team is affected", "a dozen people cannot work"], ["thousands of customers are affected", "most of our users see errors"],
            ["the entire platform is down for everyone", "every user in every country is affected"]],
}


def _with_extra(alts: str, extra: list[str]) -> str:
    parts = alts.split("|")
    return "|".join(parts[:-1] + list(extra) + parts[-1:])


for _spec in DOMAINS.values():
    for _con, (_labels, _descs, _evidence, _stmt) in list(_spec["concepts"].items()):
        _more = EXTRA[_con]
        _spec["concepts"][_con] = (_with_extra(_labels, _more[0]), _with_extra(_descs, _more[1]),
                                   _with_extra(_evidence, _more[2]), _stmt)

# Score dimensions: cues per canonical level 0..4 ("a|b|HELD" each) and level descriptions per k
# (train variants; the held-out and the calib variants are separate).
SCORES = {
    "urgency": {
        "cues": ["no rush at all, whenever you can|this can wait until next month|no hurry on this one",
                 "sometime this week would be nice|please look at it in the next few days|within a week is fine",
                 "I would like an answer today|please handle it before end of day|today would be good",
                 "this is urgent, I need it within the hour|please treat this as urgent|it needs attention very soon",
                 "EMERGENCY, everything is down right now|this is critical, act immediately|drop everything, we are losing money every minute"],
        "q": ["How urgent is `{key}`?|How quickly must `{key}` be handled?", "What is the time pressure in `{key}`?"],
        "train": {3: ["can wait", "today", "immediately"], 5: ["no rush", "this week", "today", "within the hour", "right now"],
                  4: ["can wait a week", "in a few days", "today", "right now"]},
        "held": {3: ["low priority", "same day", "critical"], 5: ["whenever", "in days", "by tonight", "very soon", "emergency"],
                 4: ["backlog", "soon", "urgent", "critical now"]},
        "calib": {3: ["relaxed timeline", "fairly soon", "asap"], 5: ["someday", "next week", "end of day", "within hours", "at once"],
                  4: ["no deadline", "moderately soon", "pressing", "immediate"]},
    },
    "anger": {
        "cues": ["thanks so much, you are great|I appreciate your help|have a lovely day",
                 "this is a bit annoying|slightly disappointed, to be honest|a little inconvenient",
                 "I am frustrated with this|this is really frustrating|honestly I am getting fed up",
                 "I am very angry about this|this is completely unacceptable|I am furious with your team",
                 "I will sue you and tell everyone to leave|I am done, worst company ever, you will pay for this|absolutely outraged, I am contacting my lawyer"],
        "q": ["How angry is the writer of `{key}`?|How upset is the author of `{key}`?", "What is the emotional temperature of `{key}`?"],
        "train": {3: ["calm", "annoyed", "furious"], 5: ["happy", "mildly annoyed", "frustrated", "angry", "enraged"],
                  4: ["calm", "annoyed", "angry", "furious"]},
        "held": {3: ["relaxed", "irritated", "livid"], 5: ["pleased", "bothered", "upset", "irate", "hostile"],
                 4: ["content", "irked", "mad", "raging"]},
        "calib": {3: ["composed", "vexed", "incensed"], 5: ["cheerful", "a bit put out", "exasperated", "fuming", "seething"],
                  4: ["at ease", "displeased", "cross", "apoplectic"]},
    },
    "impact": {
        "cues": ["it affects nobody else|only a cosmetic detail|just me and it does not matter much",
                 "one person is affected|a single user noticed it|it affects my account only",
                 "a team of about ten people is affected|several colleagues see the same thing|a few departments are blocked",
                 "hundreds of users are affected|most customers in Europe see it|a large part of the company is impacted",
                 "every single customer is affected worldwide|the whole company is offline|all systems in every region are impacted"],
        "q": ["How many people are affected according to `{key}`?|How wide is the impact described in `{key}`?", "What is the blast radius of `{key}`?"],
        "train": {3: ["few people", "a team", "everyone"], 5: ["nobody", "one person", "a team", "many users", "everyone"],
                  4: ["one person", "a team", "many users", "everyone"]},
        "held": {3: ["isolated", "partial", "global"], 5: ["none", "individual", "group", "large share", "total"],
                 4: ["individual", "group", "widespread", "total"]},
        "calib": {3: ["contained", "moderate spread", "company-wide"], 5: ["no one", "a single user", "a department", "most users", "all users"],
                  4: ["single person", "small group", "broad", "universal"]},
    },
}

for _dim, _levels in EXTRA_CUES.items():
    SCORES[_dim]["cues"] = [_with_extra(c, more) for c, more in zip(SCORES[_dim]["cues"], _levels)]

# Instruction phrasings for choice questions: "{key}" is the state key; last one is held out.
CHOICE_Q = {
    "support": "What does the customer want in `{key}`?|Which category fits `{key}`?|Route `{key}` to the right queue.|What is the main reason for `{key}`?",
    "email": "What kind of email is `{key}`?|Which folder should `{key}` go to?|Classify the email in `{key}`.|What is the purpose of the email in `{key}`?",
    "moderation": "Which policy applies to `{key}`?|What is wrong with `{key}`, if anything?|Label the forum post in `{key}`.|How should moderators tag `{key}`?",
    "security": "What kind of security event is `{key}`?|Classify the alert in `{key}`.|Which playbook fits `{key}`?|What does the log entry in `{key}` show?",
    "agent": "What is the state of the agent run in `{key}`?|Diagnose the agent trace in `{key}`.|What happened in `{key}`?|How did the step in `{key}` end?",
    "routing": "Which specialist should answer `{key}`?|What domain is `{key}` about?|Route `{key}` to a model.|What field does `{key}` belong to?",
}
NOUL_Q = "Does `{key}` {stmt}?|Is it true that `{key}` does {stmt}?|Answer yes or no: does `{key}` {stmt}?|Would you say `{key}` does {stmt}?"

# State templates: {ev} evidence, {dis} distractor clause, {cue} score cue. Last two are held out.
TEMPLATES = [
    "Hi, {ev}. {dis} {cue}.",
    "{ev}. {cue}. {dis}",
    "Hello team, {dis} {ev}. {cue}. Thanks.",
    "Subject: update. {ev}, and {cue}. {dis}",
    "{cue}. {dis} Anyway, {ev}.",
    "Note from the queue: {ev}. Also: {dis} Priority remark: {cue}.",
    "Customer wrote: {ev}. {dis} {cue}.",
    "{dis} {ev} - {cue}.",
    "Re: your request. {cue}. {ev}. {dis}",
    "FYI {ev}; {cue}. {dis}",
    # held out: the last N_HELD_TEMPLATES
    "Quick one - {dis} the real point: {ev}. {cue}.",
    "[{cue}] {ev}. {dis}",
]
N_HELD_TEMPLATES = 2
DISTRACTORS = ["This is not about {x}.|I am not writing because of {x}.|Forget about {x} for a moment.",
               "Last year I had an issue where {x}, but that was solved.|Earlier, {x}, but that is fine now.|Someone once said {x}; never mind that."]
NEGATED = "I am not saying that {x}.|To be clear, it is not the case that {x}.|Nobody here claims that {x}."


# ---- the calibration split's own strings ---------------------------------------------------------------
# Temperatures and abstention thresholds must be fitted on data as unseen as the evaluation's, by every
# checkpoint trained on this generator, including those trained before the calib split existed. Carving
# strings out of the training pools would not do that (an earlier checkpoint has trained on them), so the
# calib split has pools of its own, written in the same style: one label name, description and evidence
# phrasing per concept, one cue per score level, one score level set per k, one instruction per domain /
# dimension / noul, one distractor frame per kind, one negation frame and N_CALIB_TEMPLATES templates.
# Neither the training nor the held-out split ever draws from them, and they draw nothing else, so the
# training and held-out splits stay byte-identical for the same seed and sizes.
# concept: (label, description, evidence)
CALIB_CONCEPTS = {
 "refund": ("repayment", "the buyer asks to have the purchase amount credited back", "I was promised my 25 euros back after returning the lamp, where is it"),
 "bug": ("software_fault", "a function of the product misbehaves or errors out", "since this morning the search field returns nothing but an error page"),
 "billing": ("fee_dispute", "the writer questions an amount on their bill", "the statement lists a service charge I never agreed to"),
 "cancel": ("termination", "the customer wants the contract ended", "please end my membership, I will not be renewing"),
 "login": ("access_denied", "the user cannot enter their account", "the site keeps telling me my credentials are invalid even though they are right"),
 "shipping": ("shipment_inquiry", "the buyer is asking where their goods are", "my order was meant to arrive last week and the carrier has no update"),
 "feature": ("wishlist_item", "the user would like a new capability added", "an offline mode for the mobile app would help me a lot"),
 "meeting": ("call_booking", "the sender wants to fix a date to talk", "could we get together on Tuesday afternoon to go over the plan"),
 "phishing": ("impersonation", "a deceptive message fishing for logins or payments", "your bank account is suspended, confirm your PIN on this page to unlock it"),
 "newsletter": ("mass_mailing", "a promotional message sent to a whole list", "exclusive members offer: two for one on all shoes until Sunday"),
 "invoice_mail": ("payment_request", "a vendor wants an outstanding bill settled", "kindly transfer the 860 dollars for last month's consulting work"),
 "job": ("talent_acquisition", "a message about a vacancy or an applicant", "we reviewed your application and would like to schedule a phone screen"),
 "complaint": ("customer_grievance", "the writer is upset about how they were treated and wants it fixed", "I waited on hold for an hour and then got hung up on, this is unacceptable"),
 "harassment": ("targeted_insult", "abusive words aimed at one member", "you are pathetic and should leave this forum forever"),
 "spam_post": ("unsolicited_ads", "repetitive posts pushing products or links", "cheap designer bags here, best deal online, visit my shop link"),
 "threat": ("violent_threat", "a message announcing harm to someone", "say that again and I will come find you and make you pay"),
 "benign": ("allowed", "a harmless post that follows the rules", "does anyone have tips for keeping basil alive indoors"),
 "misinfo": ("disinformation", "a false claim passed off as true", "tap water is secretly laced with mind control chemicals"),
 "selfharm": ("self_injury_risk", "the author may be about to hurt themselves", "I feel like there is no point in going on anymore"),
 "bruteforce": ("guessing_attack", "one source is trying password after password", "hundreds of rejected logins for root from a single address overnight"),
 "malware": ("malicious_code", "harmful software is running on a machine", "the scanner found a keylogger hidden in the downloads folder of pc-17"),
 "exfil": ("data_smuggling", "confidential data is being moved out of the company", "an employee synced the entire finance share to a private cloud account"),
 "privesc": ("permission_grab", "an account obtained rights it was never given", "a test account suddenly has full administrator rights on the domain"),
 "noise": ("expected_activity", "ordinary activity that needs no action", "the weekly certificate renewal task ran on schedule"),
 "phish_click": ("lure_followed", "a staff member followed a deceptive link", "a sales rep opened the fake voicemail link and entered his login"),
 "done": ("goal_reached", "the run achieved what it was asked to", "the spreadsheet was updated and the summary was sent to the team"),
 "loop": ("no_progress", "the agent repeats the same move over and over", "it has opened the same settings page eight times without changing anything"),
 "tool_error": ("integration_error", "an external tool or command failed", "the payment API answered with a 503 service unavailable"),
 "needs_user": ("waiting_on_user", "the agent cannot continue without an answer from the user", "before I book it, should the flight be economy or business"),
 "unsafe": ("harmful_step", "the agent took an action that could do damage", "the agent tried to wipe all customer records to free up disk space"),
 "coding": ("software_dev", "a request about writing or debugging programs", "my rust code will not compile because of a borrow error"),
 "math": ("numeracy", "a question that needs numbers or equations worked out", "what is the area of a circle with radius 7"),
 "writing": ("text_composition", "a request to write or improve a piece of text", "help me write a thank you note to my team"),
 "translation": ("interpreting", "a request to move text into another language", "what does this Portuguese sentence mean in English"),
 "medical": ("clinical", "a question about illness, the body or medication", "my knee has been swollen since I fell, should I see a doctor"),
 "legal": ("jurisprudence", "a question about laws, rights or agreements", "can a shop refuse to give me a refund by law"),
}
CALIB_CUES = {  # dim -> one cue per canonical level 0..4
 "urgency": ["there is no deadline here, whenever suits you", "sometime in the next week works", "I need this sorted by this evening",
             "please handle this within the next hour", "everything is failing right now, respond at once"],
 "anger": ["thank you, you have been very kind", "this is slightly irritating", "I am pretty upset about this",
           "I am extremely annoyed and unhappy with you", "I am livid and will make sure everyone hears about this"],
 "impact": ["no one else is affected at all", "only a single person has this", "about a dozen colleagues are affected",
            "a large number of customers are affected", "every user everywhere is affected"],
}
CALIB_SCORE_Q = {"urgency": "How soon does `{key}` need a response?", "anger": "How irritated does the author of `{key}` sound?",
                 "impact": "How many people does the problem in `{key}` reach?"}
CALIB_CHOICE_Q = {"support": "Which team should pick up `{key}`?", "email": "Sort the email in `{key}` into a category.",
                  "moderation": "Which moderation label fits `{key}`?", "security": "Triage the security alert in `{key}`.",
                  "agent": "What is the outcome of the agent run in `{key}`?", "routing": "Which expert does `{key}` need?"}
CALIB_NOUL_Q = "Yes or no: does `{key}` {stmt}?"
CALIB_DISTRACTORS = ["My question is not about {x}.", "A while ago {x}, but that has been sorted out."]
CALIB_NEGATED = "It is not true that {x}."
CALIB_TEMPLATES = ["Hey there, {ev}. {cue}. {dis}", "Ticket text: {dis} {ev}. Remark: {cue}."]
N_CALIB_TEMPLATES = len(CALIB_TEMPLATES)


# Training only: this share of choice and score states also names the right option (its label, its
# description or its level text), so the option markers can first learn to find their own option in the
# state. Without such rows the CPU diagnostics sat at the uniform answer for 250+ steps on this data;
# with 30% of them the loss left the plateau after ~75 steps.
LEXICAL_P = 0.2
HINT_FRAMES = ["Re: {hint}. {text}", "{text} (tag: {hint})", "[{hint}] {text}", "{text} Topic: {hint}."]
CODED_LABEL_P = 0.15
CODE_STYLES = [lambda i: chr(ord("A") + i), lambda i: f"option_{i + 1}", lambda i: f"Q{i + 1:02d}",
               lambda i: f"team-{chr(ord('a') + i)}"]


PARTS = ("train", "calib", "held")


def split(alts: str, held: bool) -> list[str]:
    """The training part (all but the last) or the held-out part (the last) of an "a|b|HELD" list."""
    parts = alts.split("|")
    return parts[-1:] if held else parts[:-1]


def _pool_key(pool) -> str:
    return pool if isinstance(pool, str) else "\n".join(pool)


def calib_pools() -> dict:
    """{pool (as drawn by the generator): the calib split's alternatives for it}."""
    alts = {}
    for spec in DOMAINS.values():
        for con, (labels, descs, evid, _) in spec["concepts"].items():
            label, desc, ev = CALIB_CONCEPTS[con]
            alts[labels], alts[descs], alts[evid] = [label], [desc], [ev]
    for dim, spec in SCORES.items():
        for cue, mine in zip(spec["cues"], CALIB_CUES[dim]):
            alts[cue] = [mine]
        alts[spec["q"][0] + "|" + spec["q"][1]] = [CALIB_SCORE_Q[dim]]
    for dom, q in CHOICE_Q.items():
        alts[q] = [CALIB_CHOICE_Q[dom]]
    alts[NOUL_Q] = [CALIB_NOUL_Q]
    for frames, mine in zip(DISTRACTORS, CALIB_DISTRACTORS):
        alts[frames] = [mine]
        alts[frames + "|" + NEGATED] = [mine, CALIB_NEGATED]  # the hard-noul clause pool
    alts[_pool_key(TEMPLATES)] = list(CALIB_TEMPLATES)
    return alts


CALIB_POOLS = calib_pools()


class Part:
    """Which split a record belongs to and how it draws a string from a pool: train from all but the
    held-out last item(s), held from those, calib from the pool's CALIB_* alternatives."""

    def __init__(self, name: str):
        if name not in PARTS:
            raise ValueError(f"part must be one of {PARTS}, got {name!r}")
        self.name, self.unseen = name, name != "train"

    def pick(self, rng: random.Random, pool, n_held: int = 1) -> str:
        if self.name == "calib":
            return rng.choice(CALIB_POOLS[_pool_key(pool)])
        items = pool.split("|") if isinstance(pool, str) else list(pool)
        return rng.choice(items[-n_held:] if self.name == "held" else items[:-n_held])


def concept_pool() -> list[tuple[str, str]]:
    return [(d, c) for d, spec in DOMAINS.items() for c in spec["concepts"]]


def evidence(dom: str, con: str, rng: random.Random, part: Part) -> str:
    return part.pick(rng, DOMAINS[dom]["concepts"][con][2])


def make_state(rng: random.Random, dom: str, con: str, part: Part, level: int, negate_other: bool) -> tuple[dict, str | None]:
    """A dict state {key: text}; the text names `con`, carries the level-`level` cue of a random score
    dimension and, when negate_other, a negated or past mention of another concept (the distractor)."""
    key = DOMAINS[dom]["key"]
    dim = rng.choice(sorted(SCORES))
    cue = part.pick(rng, SCORES[dim]["cues"][level])
    other = None
    dis = ""
    if negate_other:
        other = rng.choice([c for c in DOMAINS[dom]["concepts"] if c != con])
        frame = part.pick(rng, rng.choice(DISTRACTORS))
        dis = frame.format(x=evidence(dom, other, rng, part))
    template = part.pick(rng, TEMPLATES, N_HELD_TEMPLATES)
    text = template.format(ev=evidence(dom, con, rng, part), dis=dis, cue=cue)
    text = " ".join(text.split())
    return {key: text[0].upper() + text[1:], "_dim": dim}, other


def choice_record(rng: random.Random, part: Part, coded_label_p: float = CODED_LABEL_P) -> dict:
    dom, con = rng.choice(concept_pool())
    spec = DOMAINS[dom]
    state, other = make_state(rng, dom, con, part, rng.randrange(5), rng.random() < 0.5)
    state.pop("_dim")
    k = rng.choice([2, 3, 4, 5, 6, 8, 10, 12, 16, 20]) if rng.random() < 0.5 else rng.randint(2, 7)
    same = [c for c in spec["concepts"] if c != con]
    rng.shuffle(same)
    if other is not None:  # the distractor concept is among the options when there is room
        same.remove(other)
        same.insert(0, other)
    foreign = [c for c in concept_pool() if c[0] != dom]
    rng.shuffle(foreign)
    picked = [(dom, c) for c in same][:k - 1]
    picked += foreign[:k - 1 - len(picked)]
    options = [(dom, con)] + picked
    rng.shuffle(options)
    with_desc = rng.random() < 0.7
    # Training only: now and then the labels are bare codes, so only the descriptions tell the options
    # apart (the model has to read them, not remember label words). Held-out and calib never draw here.
    codes = None
    if not part.unseen and with_desc and rng.random() < coded_label_p:
        codes = rng.choice(CODE_STYLES)
    criteria = {}
    gold_label = None
    for i, (d, c) in enumerate(options):
        labels, descs = DOMAINS[d]["concepts"][c][:2]
        label = part.pick(rng, labels) if codes is None else codes(i)
        while label in criteria:  # label variants never collide in practice; keep it safe
            label += "_"
        criteria[label] = part.pick(rng, descs) if with_desc else None
        if c == con and d == dom:
            gold_label = label
    key = spec["key"]
    instructions = part.pick(rng, CHOICE_Q[dom]).format(key=key)
    q = {"type": "choice", "instructions": instructions,
         "criteria": criteria if with_desc else list(criteria)}
    gold = soft_onehot(list(criteria), gold_label, 0.04)
    text, lexical = state[key], False
    if not part.unseen and codes is None and rng.random() < LEXICAL_P:  # training only: see LEXICAL_P
        hint = gold_label.replace("_", " ") if not with_desc or rng.random() < 0.5 else criteria[gold_label]
        text, lexical = with_hint(rng, text, hint), True
    return {"state": {key: text}, "questions": {"q": q}, "gold": {"q": {"probabilities": gold}},
            "meta": {"type": "choice", "domain": dom, "k": len(criteria), "distractor": other is not None,
                     **({"lexical": True} if lexical else {})}}


def with_hint(rng: random.Random, text: str, hint: str) -> str:
    frame = rng.choice(HINT_FRAMES)
    return frame.format(hint=hint, text=text)


def score_record(rng: random.Random, part: Part) -> dict:
    dom, con = rng.choice(concept_pool())
    level = rng.randrange(5)
    state, _ = make_state(rng, dom, con, part, level, rng.random() < 0.3)
    dim = state.pop("_dim")
    key = DOMAINS[dom]["key"]
    k = rng.choice([3, 4, 5])
    levels = SCORES[dim][part.name][k]
    target = level * (k - 1) / 4.0
    weights = [math.exp(-0.5 * ((i - target) / 0.45) ** 2) for i in range(k)]
    total = sum(weights)
    q = {"type": "score", "instructions": part.pick(rng, SCORES[dim]["q"][0] + "|" + SCORES[dim]["q"][1]).format(key=key),
         "criteria": levels}
    gold = {str(i): round(w / total, 6) for i, w in enumerate(weights)}
    meta = {"type": "score", "domain": dom, "k": k, "dim": dim, "level": level}
    if not part.unseen and target == int(target) and rng.random() < LEXICAL_P:  # training only, no tie: see LEXICAL_P
        state[key], meta["lexical"] = with_hint(rng, state[key], levels[int(target)]), True
    return {"state": state, "questions": {"q": q}, "gold": {"q": {"probabilities": gold}}, "meta": meta}


def noul_record(rng: random.Random, part: Part) -> dict:
    dom, con = rng.choice(concept_pool())
    spec = DOMAINS[dom]
    truth = rng.random() < 0.5
    asked = con if truth else rng.choice([c for c in spec["concepts"] if c != con])
    # Half of the false cases are hard: the state mentions the asked concept, negated or in the past.
    hard = not truth and rng.random() < 0.5
    state, _ = make_state(rng, dom, con, part, rng.randrange(5), False)
    state.pop("_dim")
    key = spec["key"]
    text = state[key]
    if hard:
        clause = part.pick(rng, rng.choice(DISTRACTORS) + "|" + NEGATED).format(x=evidence(dom, asked, rng, part))
        text = f"{text} {clause}" if rng.random() < 0.5 else f"{clause} {text}"
    stmt = spec["concepts"][asked][3]
    q = {"type": "noul", "instructions": part.pick(rng, NOUL_Q).format(key=key, stmt=stmt)}
    if rng.random() < 0.3:
        q["criteria"] = {"true": f"yes, it does {stmt}", "false": f"no, it does not {stmt}"}
    p = 0.96 if truth else 0.04
    return {"state": {key: text}, "questions": {"q": q},
            "gold": {"q": {"probabilities": {"false": round(1 - p, 6), "true": p}}},
            "meta": {"type": "noul", "domain": dom, "k": 2, "hard_negative": hard}}


def soft_onehot(labels: list, gold: str, eps: float) -> dict:
    k = len(labels)
    return {lab: round((1 - eps) + eps / k if lab == gold else eps / k, 6) for lab in labels}


def make_records(seed: int, n: int, part: str | bool, coded_label_p: float = CODED_LABEL_P) -> list[dict]:
    """n records of one split ("train", "calib", "held"; True/False mean held/train); coded_label_p only
    matters for training (the other splits never draw bare-code labels)."""
    name = {True: "held", False: "train"}.get(part, part) if isinstance(part, bool) else part
    rng = random.Random(f"{seed}:{name}")
    which = Part(name)
    makers = (lambda g, p: choice_record(g, p, coded_label_p), score_record, noul_record)
    return [makers[i % 3](rng, which) for i in range(n)]


def make_dataset(seed: int = 0, n_train: int = 6000, n_heldout: int = 900) -> tuple[list[dict], list[dict]]:
    return make_records(seed, n_train, "train"), make_records(seed, n_heldout, "held")


def make_splits(seed: int = 0, n_train: int = 6000, n_heldout: int = 900, n_calib: int = 3000,
                coded_label_p: float = CODED_LABEL_P) -> dict:
    return {"train": make_records(seed, n_train, "train", coded_label_p), "heldout": make_records(seed, n_heldout, "held"),
            "calib": make_records(seed, n_calib, "calib")}


def write_jsonl(path: str, records: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=6000)
    parser.add_argument("--heldout", type=int, default=900)
    parser.add_argument("--calib", type=int, default=3000,
                        help="calibration rows (0: no calib.jsonl; an existing one in OUT_DIR is removed)")
    parser.add_argument("--coded-label-p", type=float, default=CODED_LABEL_P,
                        help="training only: share of choice questions with descriptions whose labels are bare codes "
                             f"(default {CODED_LABEL_P}; held-out and calib never change with it)")
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    splits = make_splits(args.seed, args.train, args.heldout, args.calib, args.coded_label_p)
    write_jsonl(os.path.join(args.out_dir, "train.jsonl"), splits["train"])
    write_jsonl(os.path.join(args.out_dir, "heldout.jsonl"), splits["heldout"])
    calib_path = os.path.join(args.out_dir, "calib.jsonl")
    if args.calib:
        write_jsonl(calib_path, splits["calib"])
    elif os.path.exists(calib_path):
        # a calib.jsonl of an earlier run (other seed / sizes) would be picked up by train_mini silently
        os.remove(calib_path)
        print(f"--calib 0: removed the stale {calib_path} of an earlier run (train_mini would have used it)",
              file=sys.stderr)
    print(f"wrote {len(splits['train'])} training, {len(splits['heldout'])} held-out and {len(splits['calib'])} "
          f"calibration records to {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
