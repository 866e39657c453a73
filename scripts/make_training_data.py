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

The training split is much more varied than the held-out one, so that a model learns to match the
meaning of a state to the meaning of its options instead of remembering strings: per concept of the six
domains it draws from 7 label names, 5 descriptions and 13 evidence phrasings (EXTRA and MORE), from 22
state templates, 6 choice instructions per domain and 5 distractor frames per kind; and ten training-only
domains (TRAIN_DOMAINS: hr, finance, it_ops, ecommerce, healthcare_intake, travel, education, legal_ops,
real_estate, insurance; 50 concepts, each with 4 names, 3 descriptions and 6 evidence phrasings) give half
of the training records their gold concept and give every training choice question foreign options.
About 28% of training choice questions have 11-20 options with descriptions (MANY_OPTIONS_P). None of
this reaches the held-out or calib splits: they draw from the six domains and their own pool items with
the same rng calls as before, so both are byte-identical to before for the same seed and sizes.

Calibration split (calib.jsonl): temperatures and abstention thresholds must be fitted on data as unseen
as the evaluation's. The calib split draws every string from pools of its own (CALIB_* below: a label
name, description and evidence phrasing per concept, score cues and level sets, instructions, distractor
and negation frames, N_CALIB_TEMPLATES state templates), written in the generator's style and disjoint
from both other splits; like the held-out split it has no lexical hints and no bare-code labels, and its
records come from their own seeded stream (`random.Random(f"{seed}:calib")`). No string is taken from the
training pools, so checkpoints trained before the calib split existed have not seen it either; adding it
left the training and held-out splits byte-identical (the training split has changed since, see above).
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
# Still more training phrasings (merged like EXTRA): with them the training split has 7 label names, 5
# descriptions and 13 evidence phrasings per concept. A model that only saw 3-4 names per concept tied an
# embedding-similarity baseline on unseen names; these vary the register on purpose (formal, chatty,
# terse log lines, the odd typo, one-word descriptions) so that what is learned is the match between the
# meaning of the state and of an option, not the strings. None of them repeats or merely rewords a
# held-out (last) item or a CALIB_CONCEPTS string (tests/test_train_data.py checks exact repeats).
# concept: ("label|label|..", "description|..", "evidence|..")
MORE = {
 "refund": ("refund_request|RETURN_FUNDS|payment_reversal|want_my_money",
            "the writer wants the amount they paid sent back to them|customer asks us to pay back a purchase|refund wanted",
            "pls refund order #4471, item never worked|I would like the full price of the headphones credited back to my visa|"
            "requesting a refund for the duplicate ticket I bought by mistake|you charged me for a course I never attended, I expect that money returned|"
            "refund req - order 99812 - reason: wrong size|Good afternoon, I am writing to ask that the 59.99 I paid on 3 June be paid back to me|"
            "the concert got cancelled so I want my ticket money back|can u send back the cash for the broken blender thx"),
 "bug": ("software_bug|error_report|broken_feature|crash_report",
         "the user reports that part of the app throws errors or crashes|a defect in how the software behaves|stuff is broken",
         "ERROR 500 on /checkout since the 2.3 deploy|whenever I attach a photo the app just closes|the sync keeps failing with 'unexpected token'|"
         "the dashboard graphs are empty even though there is data|pressing undo deletes the whole document instead of the last word|"
         "notifications arrive twice and sometimes with the wrong name|the pdf export cuts off the last page every time|"
         "app crashes on startup on android 14, stack trace attached"),
 "billing": ("charge_inquiry|statement_query|billing_issue|price_discrepancy",
             "the customer does not understand an amount on their bill|someone asks why they were charged a certain sum|question about a bill",
             "my bill went up from 20 to 35 and nobody told me why|there is a line called 'service adj.' on my invoice, what is it|"
             "why was I billed for premium when I am on the basic plan|the VAT on my invoice looks wrong|you billed me in dollars but I am in the UK|"
             "two charges of 12.99 on the same day?|can you explain the pro-rated amount on this month's statement|"
             "invoice #A-5531 shows 3 seats but we only have 2"),
 "cancel": ("close_account|end_subscription|Cancel Plan|account_closure",
            "the customer is asking to stop their plan and leave|a request to switch the service off for good and stop paying|wants out",
            "pls cancel, moving to a competitor|I would like to terminate my subscription effective immediately|"
            "do not charge me again, I am done with this app|how do I stop auto-renew and close everything|cancel my gym membership from next month|"
            "we are shutting down our team workspace, please wind down our account|unsubscribe me from the paid tier and delete the account|"
            "I'm leaving, close my profile and stop billing"),
 "login": ("cannot_log_in|access_problem|password_reset|auth_issue",
           "the user is unable to sign into their account|someone can't get past the login screen|account access trouble",
           "password reset email never shows up in my inbox|the app logs me out and won't accept my pin anymore|"
           "my authenticator app was on my old phone and now I cannot get in|account locked after 3 tries, pls unlock|"
           "the login page just reloads when I enter my details|I changed my email and now I cannot sign into anything|"
           "SSO redirect loops back to the login form|it asks for a verification code that never comes"),
 "shipping": ("where_is_my_order|late_delivery|tracking_question|parcel_missing",
              "the buyer asks about an order that has not reached them|someone wants to know when their goods will be delivered|delivery problem",
              "order 5521 still says 'label created' after 9 days|where is my parcel?? it's been two weeks|the delivery window passed and no driver came|"
              "tracking shows it's stuck in customs|the courier left a note but I was home all day|my order shows delivered to a neighbour I do not know|"
              "when will the sofa be delivered, you said May|no update on the shipment since it left the warehouse"),
 "feature": ("feature_wish|new_capability|roadmap_suggestion|nice_to_have",
             "the writer asks the team to build something the app lacks|a proposal for functionality that does not exist yet|wants something added",
             "would love a dark theme for night use|pls add bulk delete, deleting one by one is painful|any plans for an API so we can automate this?|"
             "it'd be nice to pin favourite projects at the top|could the app remember my last filter settings|suggestion: let us export invoices as PDF|"
             "we need SAML single sign-on support before we can roll out|add a way to schedule posts in advance please"),
 "meeting": ("schedule_call|meeting_request|reschedule|sync_up",
             "the sender wants to set a date and time to meet|someone proposes or moves a call|time slot talk",
             "are you around Tue 2pm for 30 min?|I have to push our 1:1 to next week, sorry|could we meet in person when you are in Berlin|"
             "sending a calendar invite for the kickoff, let me know if the time works|can we do the quarterly review on the 14th instead|"
             "let's grab a coffee and go through the proposal on Friday|my availability next week: Mon am, Wed pm|would an earlier slot work for the board call"),
 "phishing": ("phishing_attempt|credential_phish|fraud_mail|spoofed_sender",
              "a con email that wants the reader to hand over passwords or pay|a message pretending to be someone trusted to steal access|fake login lure",
              "your Office365 password expires today, keep it by signing in here|Dear customer, unusual activity detected, verify your card at secure-bank-login.co|"
              "hi it's your manager, buy 5 gift cards and send me the codes|DocuSign: you have a pending document, log in with your email password to view|"
              "we could not deliver your parcel, update payment details to reschedule|IT helpdesk: reply with your username and password to keep your mailbox active|"
              "the bank details of our supplier have changed, pay the invoice to this new account|tax rebate available, enter your social security number to claim"),
 "newsletter": ("marketing_email|promo_blast|mailing_list|advert",
                "a brand's mail pushing products, deals or events|marketing copy, not a personal message|promo",
                "FLASH SALE: 24 hours only, free shipping on everything|Your weekly digest: 5 stories we think you will love|spring collection is live - shop now|"
                "members get early access to our Black Friday deals|don't miss our product launch livestream on Thursday|last chance! your cart items are 20% off today|"
                "new blog post + tips from our experts, read more inside|you're invited: free tasting event at our downtown store"),
 "invoice_mail": ("supplier_bill|bill_to_pay|outstanding_invoice|remittance_due",
                  "a supplier sends a bill or chases a payment|someone wants money owed for goods or services|pay this bill",
                  "please find attached invoice INV-0932 for the May deliveries|friendly reminder: 2,450 USD is now 30 days past due|"
                  "net 30 terms apply, bank details are on page 2|could you confirm when invoice 7781 will be paid|statement of account attached, 3 invoices remain open|"
                  "final notice before we pass this to collections|pls process the attached bill for the catering on the 12th|"
                  "our accounts team has not yet received payment for PO 4410"),
 "job": ("applicant|vacancy|recruiter_outreach|open_position",
         "someone applies for a role or a recruiter contacts a candidate|a message about hiring for a position|job stuff",
         "I'd like to be considered for the backend engineer role|a recruiter here - are you open to new opportunities?|"
         "attached: my resume and portfolio for the UX opening|we regret to inform you we went with another candidate|"
         "can you tell me the salary range for the nurse vacancy|following up on my application from two weeks ago|"
         "your profile matches a senior analyst position at our client|please complete the coding test for the next stage of hiring"),
 "complaint": ("formal_complaint|service_failure|unhappy_customer|escalate_to_manager",
               "a sharp protest about bad service, asking someone to act|an unhappy customer escalating their case|angry customer",
               "I have been passed between four departments and nobody helps|your engineer never showed up, twice|"
               "I want to lodge a formal complaint about your staff|three weeks and my issue is still open, shameful|"
               "the way your agent spoke to me was disrespectful|I expect compensation for the time I lost|"
               "I will be posting a review about this terrible experience|no one returns my emails, I am escalating this"),
 "harassment": ("personal_abuse|name_calling|hostile_remarks|degrading_comment",
                "a user is being insulted or demeaned by another|posts that mock or belittle a specific member|insulting someone",
                "lol look at this loser trying to sound smart|@mike_88 you're a braindead clown, log off|nobody asked for your trash opinion, idiot|"
                "every time you post I cringe, just quit|you're too dumb to be in this group|keep crying, snowflake, nobody likes you|"
                "she is a useless excuse for a moderator|imagine being this sad and lonely lmao"),
 "spam_post": ("spam_link|promo_spam|commercial_spam|bot_post",
               "an off-topic post that just sells something or drops a link|unsolicited advertising in the forum|ads",
               "CHEAP PILLS >>> bit.ly/xx12|make $$$ fast, join my telegram|check out my shop for 70% off sneakers!!!|"
               "I made 300 a day with this one trick, link in bio|best essay writing service, order now|buy instagram likes, 1000 for 2 dollars|"
               "replica handbags wholesale, whatsapp me|free robux generator, no survey"),
 "threat": ("threat_of_harm|menacing|death_threat|physical_threat",
            "the writer says they will physically hurt someone|intimidating words warning a person they will be harmed|threatening",
            "I will track you down and you will be sorry|one more word and I'll smash your face in|you'd better hope we never meet in person|"
            "I'm bringing a knife to the meetup, see what happens|your family is not safe, remember that|I will make sure you get hurt after the game|"
            "keep talking and you'll end up in hospital|gonna wreck your car tonight if you ban me again"),
 "benign": ("no_action|clean|normal_post|within_rules",
            "on-topic chat with nothing to moderate|a friendly contribution to the discussion|ok post",
            "anyone else watching the finale tonight?|just adopted a puppy, any name ideas|thanks, your tip about the router fixed it|"
            "here's my sourdough after 3 tries, finally!|which hiking trail is best in autumn|congrats to everyone who finished the course|"
            "lol same, my cat does that too|the meetup is at 6, see you all there"),
 "misinfo": ("false_information|conspiracy|fabricated_claim|misleading",
             "spreads conspiracy theories|pseudo-science or rumours that contradict the evidence|fake claim",
             "the earth is flat and NASA photoshops every picture|lemon water cures cancer, big pharma hides it|"
             "chemtrails are how they control the weather and us|the shooting was staged with crisis actors|birds aren't real, they are government drones|"
             "wifi routers cause autism, share before they delete this|the pyramids were built by aliens, proven|windmills cause cancer, it's in the documents"),
 "selfharm": ("suicidal_ideation|mental_health_crisis|in_danger|wellbeing_alert",
              "the author talks about wanting to die or injure themselves|signs of suicidal thoughts in the writer|danger to self",
              "I wrote goodbye letters to my family tonight|I can't do this anymore, tonight is the night|no one would notice if I was gone|"
              "been hurting myself again, it's the only thing that helps|I looked up how many pills it takes|I'm so tired of living, I just want it to stop|"
              "this is my last post, thank you all|I keep standing at the edge of the bridge"),
 "bruteforce": ("password_guessing|brute_force_attempt|login_spray|failed_login_storm",
                "an attacker is trying lots of passwords against accounts|a flood of failed authentication attempts|pw guessing",
                "sshd: 1,200 failed password attempts for root from 198.51.100.23|Azure AD: 300 accounts saw a single failed login each from the same ASN|"
                "VPN gateway logged 80 bad passwords per minute for user svc_backup|wp-login.php hit 5000 times in an hour from rotating IPs|"
                "event 4625 repeated 900 times for administrator|fail2ban banned 14 addresses for repeated auth failures|"
                "IMAP login failures spiking for every mailbox|OWA: sequential usernames tried with Winter2024!"),
 "malware": ("malicious_software|virus_detected|ransomware|infected_host",
             "a device shows signs of being compromised by a malicious program|endpoint protection caught a virus or worm|infected",
             "Defender: Trojan Emotet detected in the AppData folder of user ana|files on the share renamed to .locked, ransom note in every folder|"
             "svchost.exe spawned from a temp folder, hash matches a known stealer|workstation 0113 is mining monero at 100% cpu|"
             "the USB stick from the conference installed an autorun worm|sandbox verdict malicious for the attachment opened by sales|"
             "beacon every 60s to 45.9.20.11 over port 443|EDR isolated the host after it ran the mimikatz credential dumper"),
 "exfil": ("data_loss_event|unauthorized_upload|information_leak|outbound_leak",
           "someone is sneaking internal information out to an outside destination|unexplained bulk transfer of internal files to an outside host|leak",
           "DLP: 4,000 records with credit card numbers emailed to a gmail address|a departing engineer zipped the repo and uploaded it to dropbox|"
           "outbound traffic 30x baseline to an IP at a hosting provider|a laptop synced the HR share to an unapproved sync client|"
           "someone printed 600 pages of customer contracts at 2am|an archive named backup.7z left via ftp to an external host|"
           "S3 bucket with patient data made public and downloaded 3k times|mass export of CRM contacts followed by an upload to wetransfer"),
 "privesc": ("privilege_gain|unauthorized_admin|rights_abuse|root_access",
             "a process or user climbed to admin level without approval|access levels were raised outside the normal change process|escalated access",
             "sudo -i executed by www-data|new member in Enterprise Admins: temp_user01|a pod mounted the host filesystem and ran as root|"
             "IAM: user dev-ci attached AdministratorAccess to itself|setuid binary abused to spawn a root shell|"
             "a helpdesk account reset the CEO's password and joined Domain Admins|service account started granting itself owner on all subscriptions|"
             "token manipulation detected, process now running as SYSTEM"),
 "noise": ("benign_alert|no_threat|informational|known_good",
           "the alert reflects normal, authorised activity|routine operations with nothing suspicious|fine, ignore",
           "scheduled antivirus definition update completed|the pentest team's scan came from the approved range|user logged in from the usual office IP at 9:02|"
           "log rotation ran at midnight as configured|change ticket CHG-2231 covers the firewall rule update|NTP drift corrected automatically|"
           "backup verification job succeeded on all nodes|IT pushed the new browser version to all laptops"),
 "phish_click": ("clicked_phish|user_clicked_link|credential_submitted|lure_victim",
                 "someone on staff fell for a phishing mail and visited the bad page|credentials were entered on a look-alike site by an employee|clicked bad link",
                 "proxy: user bsmith visited micros0ft-login.com 2 min after receiving the mail|an accountant submitted her password on a fake sharepoint page|"
                 "the mail was reported as phishing after 3 users had already clicked|safe links blocked a click, but the user retried from their phone|"
                 "a user opened the 'invoice.html' attachment and logged in through it|new inbox rule created right after the user clicked the lure link|"
                 "helpdesk: 'I clicked the DHL link and entered my details, was that bad?'|URL click event on a known phishing domain from the CFO's laptop"),
 "done": ("task_succeeded|all_done|completed_ok|mission_accomplished",
          "the agent did what was asked and confirmed it|the run ended successfully|done",
          "step 12: wrote summary.md, user confirmed it looks good|final answer delivered, no errors in the log|migration applied, all 240 tests green|"
          "invoice sent and the CRM entry updated|flight booked, confirmation number ZK41P sent to the user|the bug is fixed and the PR was merged|"
          "scraped 50 pages, saved results.csv, exiting with code 0|task complete: calendar event created for Friday 10am"),
 "loop": ("repeated_action|cycling|stuck|going_in_circles",
          "the trace shows one action being redone without end|the run cycles between steps without getting anywhere|stuck",
          "step 31: read_file config.yaml (same as steps 29, 27, 25)|it tried the same failing pip install 9 times|"
          "plan: search docs, read docs, search docs, read docs|the same web search ran 12 times with no new results|"
          "the agent keeps clicking 'next' on the same page|identical tool call repeated with identical arguments|"
          "thought: I should check the file. action: check the file. (x14)|it undid and redid the same edit over and over"),
 "tool_error": ("tool_exception|api_failure|execution_error|call_error",
                "a function call from the agent came back with a failure code|the agent's command or request blew up with an exception|tool failed",
                "Traceback (most recent call last): KeyError: 'results'|HTTP 429 Too Many Requests from the search API|git push rejected: authentication failed|"
                "ModuleNotFoundError: No module named pandas|the SQL tool returned: relation 'users' does not exist|browser.open failed: net::ERR_NAME_NOT_RESOLVED|"
                "subprocess exited with code 137 (out of memory)|upload tool: 413 payload too large"),
 "needs_user": ("question_for_user|blocked_on_user|user_input_required|missing_info",
                "the agent stopped to ask the user for a detail it lacks|progress is paused pending a reply from the human|need info",
                "which of the three spreadsheets do you mean?|I need your shipping address to place the order|do you want the report in English or French?|"
                "should I overwrite the existing file or make a copy?|please provide the API key so I can continue|what budget should I stay under for the hotel?|"
                "I found two people named J. Smith, which one?|can you confirm the meeting should be public?"),
 "unsafe": ("safety_violation|destructive_action|unsafe_behavior|guardrail_breach",
            "the agent did or tried something destructive or against policy|an action risking data, money or security|unsafe",
            "ran DROP TABLE customers; to 'clean up'|pushed with --force to main, overwriting others' work|posted the user's password in the team chat|"
            "chmod -R 777 / to fix a permission error|bought 40 items with the user's card without asking|sent the confidential draft to a journalist|"
            "disabled two-factor auth on the admin account|turned off the backups to speed up the job"),
 "coding": ("programming_help|dev_question|code_review|debugging",
            "help with source code, libraries or compiler errors|a developer question|code",
            "how do I center a div in css|my python script says list index out of range|write a bash one-liner to rename all .txt files|"
            "what's the difference between a mutex and a semaphore|convert this for loop to a list comprehension|why does git say detached HEAD|"
            "npm install fails with ERESOLVE|review my Go handler for race conditions"),
 "math": ("maths|equation_solving|calculus|statistics",
          "a problem of algebra, geometry, calculus or probability|someone wants a number computed or a proof checked|math q",
          "what is 15% tip on 84 dollars|solve for y: 2y - 7 = 11|what's the probability of rolling two sixes|integrate e to the 2x dx|"
          "is 221 a prime number|simplify (x^2 - 9)/(x - 3)|how many degrees are in a hexagon's interior angles|find the mean and standard deviation of 4, 8, 15, 16"),
 "writing": ("essay_help|proofreading|creative_writing|wordsmithing",
             "someone wants wording drafted, shortened or polished|creative or professional composition|writing task",
             "proofread my cover page for typos|turn these notes into a LinkedIn post|write a short bedtime story about a dragon|"
             "shorten this abstract to 150 words|give me three slogans for a bakery|fix the grammar in my blog intro|draft an out-of-office reply|"
             "rephrase this product description so it sounds premium"),
 "translation": ("translate_text|language_help|multilingual|foreign_language",
                 "someone needs words or documents in another tongue|what a phrase means in a different language|translate",
                 "how do you say 'where is the station' in Dutch|translate this email to my landlord into Polish|what does 'schadenfreude' mean in English|"
                 "need the Chinese version of our product label|I need this birthday message in Greek|is this Spanish sentence translated correctly|"
                 "render the user manual in Portuguese|what is 'thank you very much' in Swahili"),
 "medical": ("health_question|doctor_question|wellness|illness",
             "someone wonders if they should see a doctor|questions about pain, disease or medicines|health",
             "my throat has been sore for a week, is that normal|can I drink alcohol while on antibiotics|what is a normal blood pressure for a 60 year old|"
             "I get dizzy when I stand up quickly|how long is the flu contagious|my toddler swallowed a coin, what do I do|"
             "is it bad to take melatonin every night|what causes numbness in my left hand"),
 "legal": ("legal_question|my_rights|attorney_needed|law_help",
           "someone asks what the law allows or requires|a question about tenancy, employment or court rules|legal",
           "can I be evicted without notice|is a verbal agreement binding|my neighbour's tree fell on my car, who pays|"
           "do I have to pay a parking fine from a private company|how long does a copyright last|can I record a phone call without telling them|"
           "my boss hasn't paid overtime, is that legal|what is the statute of limitations for debt"),
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
        _more, _most = EXTRA[_con], MORE[_con]
        _spec["concepts"][_con] = (_with_extra(_labels, _more[0] + _most[0].split("|")),
                                   _with_extra(_descs, _more[1] + _most[1].split("|")),
                                   _with_extra(_evidence, _more[2] + _most[2].split("|")), _stmt)

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
    "support": "Pick the intent of `{key}`.|Which bucket does `{key}` belong in?|What is `{key}` mostly asking for?|What does the customer want in `{key}`?|Which category fits `{key}`?|Route `{key}` to the right queue.|What is the main reason for `{key}`?",
    "email": "Tag the email `{key}`.|What is the sender of `{key}` after?|Which label should the mail in `{key}` get?|What kind of email is `{key}`?|Which folder should `{key}` go to?|Classify the email in `{key}`.|What is the purpose of the email in `{key}`?",
    "moderation": "Does `{key}` break a rule, and which?|Pick the moderation category for `{key}`.|What kind of post is `{key}`?|Which policy applies to `{key}`?|What is wrong with `{key}`, if anything?|Label the forum post in `{key}`.|How should moderators tag `{key}`?",
    "security": "SOC triage: what is `{key}`?|Which incident type matches `{key}`?|Categorise the event in `{key}`.|What kind of security event is `{key}`?|Classify the alert in `{key}`.|Which playbook fits `{key}`?|What does the log entry in `{key}` show?",
    "agent": "Label the agent step in `{key}`.|What went on in the trace `{key}`?|Which status fits the run in `{key}`?|What is the state of the agent run in `{key}`?|Diagnose the agent trace in `{key}`.|What happened in `{key}`?|How did the step in `{key}` end?",
    "routing": "Send `{key}` to which assistant?|What subject is `{key}`?|Which skill does `{key}` call for?|Which specialist should answer `{key}`?|What domain is `{key}` about?|Route `{key}` to a model.|What field does `{key}` belong to?",
}
NOUL_Q = "Check `{key}`: does it {stmt}?|Based on `{key}` alone, does it {stmt}?|Does the text in `{key}` {stmt}?|Does `{key}` {stmt}?|Is it true that `{key}` does {stmt}?|Answer yes or no: does `{key}` {stmt}?|Would you say `{key}` does {stmt}?"

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
    # more training-only frames (other registers: formal mail, log line, chat, quoted text, notes)
    "Hey support, {ev}!! {dis} {cue}",
    "Dear Sir or Madam, {ev}. {dis} {cue}. Kind regards, J.",
    "ts=2024-03-11T08:14:52Z level=info msg=\"{ev}\" {dis} note=\"{cue}\"",
    "{ev}... {cue}. {dis} thx",
    "Forwarded message: {ev}. {dis} ({cue})",
    "So basically {ev}. {dis} Oh and {cue}.",
    "Summary: {ev}. Context: {dis} Remark on timing and scope: {cue}.",
    "> {ev} > {dis} > {cue}",
    "{dis} Main point: {ev}. {cue}.",
    "Chat log - user: {ev}. user: {dis} user: {cue}.",
    "Case notes: {cue}; {ev}. {dis}",
    "yo {ev}, {cue}. {dis}",
    # held out: the last N_HELD_TEMPLATES
    "Quick one - {dis} the real point: {ev}. {cue}.",
    "[{cue}] {ev}. {dis}",
]
N_HELD_TEMPLATES = 2
DISTRACTORS = ["This is not about {x}.|I am not writing because of {x}.|Unrelated: {x} - that's a different thing.|"
               "(and no, {x} is not the issue)|Separate topic, so ignore it: {x}.|Forget about {x} for a moment.",
               "Last year I had an issue where {x}, but that was solved.|Earlier, {x}, but that is fine now.|"
               "Back in March {x}, but you fixed that.|Old ticket, already closed: {x}.|There was a time when {x}; resolved since.|"
               "Someone once said {x}; never mind that."]
NEGATED = "I am not saying that {x}.|To be clear, it is not the case that {x}.|I never said {x}.|It would be wrong to think {x}.|" \
    "Nobody here claims that {x}."


# ---- training-only domains -----------------------------------------------------------------------------
# Ten more domains (50 concepts) that ONLY the training split uses: as the gold concept of training records
# (TRAIN_NEW_DOMAIN_P of them) and as foreign options of training choice questions. With six domains the
# model met the same 36 concepts over and over and could learn each concept's strings; many more concepts,
# each with its own names, descriptions and evidence, push it to match the meaning of the state to the
# meaning of the options instead. The held-out and calib parts never see these: they draw gold concepts,
# distractors and options from concept_pool() (the six DOMAINS above) exactly as before, so their rng
# stream and output are unchanged. Every item of these pools is a training item (there is no held-out
# last item), see TrainPool.
# domain: {"key", "choice_q": "instr|..", "concepts": {concept: ("labels|..", "descriptions|..", "evidence|..", noul statement)}}
TRAIN_DOMAINS = {
    "hr": {"key": "hr_case", "choice_q": "Which HR process does `{key}` need?|Classify the HR case in `{key}`.|What is the employee asking about in `{key}`?|Route `{key}` within HR.",
           "concepts": {
        "leave_request": ("time_off|leave_request|vacation|PTO",
                          "an employee asks for days off work|a request for holiday, sick days or parental leave|time off",
                          "I'd like to take the 3rd to the 10th of August off|can I use two days of PTO next week for a family wedding|"
                          "requesting parental leave starting in October|out sick today and tomorrow, doctor's note to follow|"
                          "is there still time to book my remaining holiday before year end|Leave request: 5 days, reason: moving house",
                          "ask for time off"),
        "payroll_error": ("payroll_error|salary_issue|wrong_pay|paycheck_problem",
                          "an employee was paid the wrong amount or not at all|a mistake on a payslip|pay is wrong",
                          "my salary this month is 300 short|overtime from June is missing from my payslip|"
                          "I was paid twice, please claw back the extra|the tax code on my payslip is wrong since I moved|"
                          "still no pay deposited and it's the 3rd|my bonus was not included in the March payroll",
                          "report a pay mistake"),
        "benefits_enrollment": ("benefits|benefit_signup|health_plan|pension_signup",
                                "an employee wants to join or change a benefit plan|questions about insurance, pension or perks through work|benefit enrolment",
                                "how do I add my wife to the dental plan|I want to raise my pension contribution to 8 percent|"
                                "open enrolment closes Friday, can I still switch plans|does the company cover gym memberships|"
                                "need the form to opt into the cycle-to-work scheme|which health plan includes vision care",
                                "ask about joining a benefit plan"),
        "onboarding": ("onboarding|new_hire_setup|first_day|induction",
                       "getting a new employee set up to start work|preparations for someone's first days on the job|new starter",
                       "new starter on Monday needs a laptop, badge and email|when is the induction session for this month's hires|"
                       "my new hire has no access to the HR portal yet|please add Priya to the onboarding checklist|"
                       "who will be the buddy for the new designer|first-day schedule for the two interns starting June 1",
                       "concern a new employee starting"),
        "performance_review": ("performance_review|appraisal|annual_review|feedback_cycle",
                               "about an employee's evaluation, goals or rating|the yearly review of how someone did at work|appraisal",
                               "I disagree with the 'meets expectations' rating I got|when are self-assessments due for the mid-year review|"
                               "can I add my manager's comments to the appraisal form|the calibration meeting for team ratings is next week|"
                               "need a template for setting Q3 objectives|my review was postponed three times, can we book it",
                               "concern a performance review"),
    }},
    "finance": {"key": "entry", "choice_q": "Which finance workflow handles `{key}`?|What kind of finance item is `{key}`?|Assign `{key}` to a finance desk.|Classify `{key}` for the controller.",
                "concepts": {
        "budget_approval": ("budget_approval|spend_request|capex_request|purchase_approval",
                            "someone wants permission to spend money from a budget|a request to sign off planned spending|needs budget ok",
                            "requesting approval for 12k to buy new servers|can marketing get an extra 5,000 for the trade show|"
                            "please sign off the Q4 training budget|capex form attached for the new forklift|"
                            "need CFO approval before we order the licences|is there budget left for two contractors in November",
                            "ask for spending to be approved"),
        "tax_filing": ("tax_filing|tax_return|vat_submission|tax_compliance",
                       "preparing or submitting tax returns and declarations|a question about a tax deadline or filing|taxes",
                       "the quarterly VAT return is due on the 7th|do we need to file withholding tax for the US contractor|"
                       "the accountant needs the payroll figures for the corporate tax return|missed the sales tax deadline in Ohio, what now|"
                       "which forms do I file for the R&D tax credit|tax authority letter asking for last year's return",
                       "concern a tax filing"),
        "audit_finding": ("audit_finding|audit_issue|control_gap|auditor_query",
                          "an auditor found a problem in the books or controls|an issue raised during an audit|audit point",
                          "the auditors could not match 14 payments to invoices|external audit flagged missing approvals on journal entries|"
                          "internal audit found the same person creates and pays vendors|audit query: explain the 40k variance in inventory|"
                          "management letter lists three control weaknesses|the auditor wants evidence for the revenue cut-off",
                          "report an audit finding"),
        "currency_exchange": ("fx_conversion|currency_exchange|forex|exchange_rate",
                              "converting money between currencies or asking about rates|a foreign exchange deal or rate question|fx",
                              "please convert 50,000 EUR to USD at today's rate|what rate did we use for the yen payment|"
                              "should we hedge the GBP exposure for Q3|need 2m Swiss francs for the acquisition closing|"
                              "the bank applied a worse exchange rate than quoted|book a forward contract for the CAD invoices",
                              "concern changing money between currencies"),
        "loan_application": ("loan_application|credit_request|financing|borrowing",
                             "someone applies for a loan or a line of credit|a request to borrow money from a bank|loan",
                             "we'd like to apply for a 250k working capital loan|what documents do you need for the mortgage application|"
                             "can our credit line be raised to 1 million|application for a small business loan, financials attached|"
                             "is the equipment financing offer still available at 4 percent|my loan application has been pending for a month",
                             "ask to borrow money"),
    }},
    "it_ops": {"key": "ticket", "choice_q": "Which IT queue should take `{key}`?|What does the user need in `{key}`?|Categorise the IT ticket `{key}`.|What kind of IT request is `{key}`?",
               "concepts": {
        "disk_full": ("disk_full|storage_capacity|out_of_space|quota_exceeded",
                      "a drive, server or mailbox has run out of space|storage is nearly or completely full|no space",
                      "/var on db-02 is at 98 percent|my mailbox is full and I cannot receive mail|"
                      "the shared drive says quota exceeded|build agents failing with 'no space left on device'|"
                      "laptop C: drive has 200 MB free|the log volume fills up every night",
                      "report running out of storage space"),
        "hardware_request": ("hardware_request|equipment_order|new_device|peripheral_request",
                             "someone asks for new equipment such as a laptop or monitor|a request to order devices or accessories|kit request",
                             "can I get a second monitor for my desk|my team needs three new laptops for the contractors|"
                             "requesting a headset for calls|need a docking station that works with a MacBook|"
                             "please order an ergonomic keyboard for Sam|is there a spare phone for the new receptionist",
                             "ask for new equipment"),
        "software_install": ("software_install|app_installation|license_request|install_request",
                             "a user wants a program installed or licensed|request for access to an application|install app",
                             "please install Visio on my laptop|I need an Adobe licence for the design project|"
                             "can you push Python 3.12 to the analytics machines|request to install Zoom plugin for Outlook|"
                             "admin rights needed to install the printer driver|we need a Tableau seat for the new analyst",
                             "ask for software to be installed"),
        "network_outage": ("network_down|connectivity_issue|vpn_problem|wifi_outage",
                           "the network, wifi or VPN is not working|users cannot reach the internet or internal systems|no connection",
                           "the wifi on the 3rd floor keeps dropping|VPN connects but no internal sites load|"
                           "whole Lisbon office has no internet since 9am|packet loss between the two data centres|"
                           "switch in rack 4 is down, half the floor is offline|can't reach the intranet from home",
                           "report a network outage"),
        "backup_restore": ("restore_request|file_recovery|backup_restore|undelete",
                           "someone needs deleted or overwritten data brought back from backup|recovering lost files|restore",
                           "I accidentally deleted the Q2 folder, can you restore it|please roll back the wiki to yesterday's version|"
                           "need last Friday's copy of the budget spreadsheet|restore the deleted mailbox of a former employee|"
                           "the database was overwritten, recover from the 2am snapshot|is there a backup of my desktop files from before the reinstall",
                           "ask for data to be restored"),
    }},
    "ecommerce": {"key": "listing", "choice_q": "What does the seller need for `{key}`?|Classify the marketplace item `{key}`.|Which seller-support team handles `{key}`?|What is `{key}` about?",
                  "concepts": {
        "price_update": ("price_change|repricing|price_update|new_price",
                         "a seller wants the price of a product changed|updating what an item costs in the shop|reprice",
                         "lower the price of SKU 4411 to 19.99|raise all winter jackets by 10 percent from Monday|"
                         "our competitor dropped their price, match it|set the sale price for the blue mug to 8 euros|"
                         "the listed price is wrong, should be 249 not 294|please end the discount and go back to full price",
                         "ask for a price change"),
        "out_of_stock": ("out_of_stock|inventory_low|stockout|sold_out",
                         "a product has run out or stock levels are too low|inventory of an item is gone|no stock",
                         "the red size M is sold out again|only 2 units left of the bestseller|"
                         "warehouse shows zero stock but the listing is still live|backorder the espresso machines until the next shipment|"
                         "we keep selling items we don't have in inventory|restock alert: charging cables at 0",
                         "report that an item is out of stock"),
        "counterfeit_listing": ("counterfeit|fake_product|knockoff|brand_infringement",
                                "a listing sells fake or copied branded goods|an item that imitates a brand without permission|fake goods",
                                "this seller's 'Nike' shoes are obvious fakes|brand owner reports copies of their perfume in our store|"
                                "listing uses our logo on cheap imitation bags|the serial numbers on these watches don't exist|"
                                "buyers say the 'original' headphones sound nothing like the real ones|knockoff designer sunglasses at 10 percent of retail",
                                "report fake branded goods"),
        "presale_question": ("product_question|presale_inquiry|spec_question|before_buying",
                             "a shopper asks about a product before buying it|questions about size, material or compatibility|pre-sale",
                             "does this charger work with an iPhone 15|is the sofa fabric washable|"
                             "what are the exact dimensions of the bookshelf|will this dress fit someone who is 5'10''|"
                             "is the coffee grinder quiet enough for a flat|does the tent come with pegs",
                             "ask about a product before buying"),
        "bulk_order": ("bulk_order|wholesale_quote|volume_purchase|b2b_order",
                       "a customer wants a large quantity or a wholesale price|a quote request for many units|bulk buy",
                       "we need 500 branded mugs for a conference, what price|do you offer wholesale rates for shops|"
                       "quote for 2,000 t-shirts with our print|can we order 80 chairs for the new office in one shipment|"
                       "minimum order quantity for resellers?|volume discount for 300 notebooks",
                       "ask for a large order or wholesale price"),
    }},
    "healthcare_intake": {"key": "intake_note", "choice_q": "Which intake pathway fits `{key}`?|What does the patient need in `{key}`?|Triage the intake note `{key}`.|Which clinic desk handles `{key}`?",
                          "concepts": {
        "prescription_refill": ("refill|prescription_renewal|repeat_prescription|medication_refill",
                                "a patient needs more of a medicine they already take|renewing a prescription|refill",
                                "I'm down to my last 3 blood pressure pills|need a repeat of my asthma inhaler|"
                                "pharmacy says my prescription expired, please renew|can the doctor send the insulin script to a new pharmacy|"
                                "refill request: levothyroxine 50mcg, 90 days|running out of my antidepressant before the holiday",
                                "ask for a prescription refill"),
        "lab_results": ("lab_results|test_results|bloodwork|results_inquiry",
                        "a patient asks about the results of a test they had|questions about blood tests, scans or lab values|results",
                        "are my blood test results back yet|what does a high ferritin value mean on my report|"
                        "I had the MRI on Monday, when will I hear|the portal shows my cholesterol in red, should I worry|"
                        "can you send my lab report to my specialist|my urine test came back abnormal, what next",
                        "ask about test results"),
        "vaccination": ("vaccination|immunisation|vaccine_appointment|shot",
                        "a question or request about getting a vaccine|immunisation for travel, flu or children|jab",
                        "is my son due for his measles booster|do I need a yellow fever shot for Kenya|"
                        "when does the flu vaccine clinic open this autumn|I missed my second tetanus dose|"
                        "can pregnant patients get the whooping cough vaccine|need a vaccine record for my new job",
                        "ask about a vaccination"),
        "specialist_referral": ("referral|specialist_referral|consult_request|refer_out",
                                "a patient needs to be sent on to a specialist|a request to be referred to another doctor|referral",
                                "I'd like a referral to a dermatologist for this mole|my GP said I need to see a cardiologist|"
                                "insurance needs a referral letter before the orthopaedic visit|can I be referred to a physio for my back|"
                                "referral to ENT requested, recurrent ear infections|who do I ask for a referral to a sleep clinic",
                                "ask to be referred to a specialist"),
        "allergy_report": ("allergy|adverse_reaction|allergy_update|drug_reaction",
                           "the patient reports an allergy or a bad reaction to something|records need a new allergy added|reaction",
                           "I broke out in hives after the penicillin|please add a latex allergy to my file|"
                           "my lips swelled after the new blood pressure pill|I'm allergic to peanuts, is this medicine safe|"
                           "rash all over after starting the antibiotic on Tuesday|severe reaction to contrast dye last time",
                           "report an allergy or reaction"),
    }},
    "travel": {"key": "itinerary", "choice_q": "What does the traveller need in `{key}`?|Which travel desk handles `{key}`?|Classify the travel request `{key}`.|What is `{key}` about?",
               "concepts": {
        "flight_delay": ("flight_delay|delayed_flight|missed_connection|schedule_disruption",
                         "a flight is late, cancelled or a connection was missed|disruption to air travel plans|delay",
                         "my flight to Rome is delayed 4 hours|I missed the connection in Frankfurt because the first leg was late|"
                         "BA 117 cancelled, what are my options|the gate says delayed indefinitely|"
                         "stuck at the airport overnight after the storm|compensation for a 5 hour delay on EZY 802",
                         "mention a delayed or cancelled flight"),
        "hotel_booking": ("hotel_booking|accommodation|room_reservation|lodging",
                          "someone wants to book, change or ask about a hotel stay|reserving a room|hotel",
                          "book a double room in Lyon for 3 nights|can I check in early at the Marriott|"
                          "change my hotel reservation to a non-smoking room|need a place to stay near the conference centre|"
                          "is breakfast included in the room rate|extend my stay by one night please",
                          "ask about a hotel stay"),
        "visa_question": ("visa|entry_requirements|travel_documents|passport_rules",
                          "questions about visas, passports or entry rules|what documents are needed to enter a country|visa q",
                          "do Canadians need a visa for Vietnam|my passport expires in 4 months, can I still fly to Thailand|"
                          "how long does the Schengen visa take|is an ESTA enough for a business trip|"
                          "what transit visa do I need in Dubai|my visa was refused, can I reapply",
                          "ask about visas or entry documents"),
        "lost_luggage": ("lost_luggage|baggage_claim|missing_bag|delayed_baggage",
                         "a traveller's suitcase did not arrive or was damaged|a problem with checked baggage|bag lost",
                         "my suitcase never came off the belt in Lisbon|the airline lost my bag with all my clothes|"
                         "bag tag LH 442211, still missing after 3 days|my luggage arrived with a broken wheel|"
                         "I filed a PIR at the airport, no news since|they sent my bag to Oslo instead of Osaka",
                         "report lost or damaged luggage"),
        "seat_upgrade": ("upgrade|seat_selection|cabin_upgrade|seat_change",
                         "someone wants a better seat or cabin class|choosing or changing seats on a flight|upgrade",
                         "can I use miles to upgrade to business|I'd like an aisle seat on the return flight|"
                         "is there extra legroom available on row 12|please seat me next to my daughter|"
                         "how much to move to premium economy|bid for an upgrade on the overnight flight",
                         "ask for a seat change or upgrade"),
    }},
    "education": {"key": "student_message", "choice_q": "Which school office handles `{key}`?|What does the student want in `{key}`?|Classify the student message `{key}`.|What is `{key}` about?",
                  "concepts": {
        "grade_appeal": ("grade_appeal|mark_dispute|regrade_request|grade_review",
                         "a student thinks a grade is wrong and wants it looked at again|contesting an exam or course mark|regrade",
                         "I believe question 4 on my exam was marked incorrectly|can my essay be re-marked, the feedback doesn't match the grade|"
                         "my final grade shows C but my scores add up to a B|requesting a formal review of my dissertation mark|"
                         "the lab report points were not counted in my total|I want to appeal the fail in statistics",
                         "dispute a grade"),
        "course_enrollment": ("enrolment|course_registration|class_signup|add_drop",
                              "a student wants to join, drop or switch a course|registering for classes|sign up",
                              "the biology elective is full, can I join the waitlist|how do I drop calculus without a penalty|"
                              "I want to switch from the morning to the evening section|registration portal won't let me add CS201|"
                              "can I take a fifth module this term|deadline to enrol for the summer school?",
                              "ask to join or drop a course"),
        "assignment_extension": ("extension_request|deadline_extension|late_submission|more_time",
                                 "a student asks for more time to hand in work|asking to submit an assignment late|extension",
                                 "could I have three extra days for the history essay, I was ill|my laptop died, may I submit the project on Monday|"
                                 "requesting an extension on coursework due to a family emergency|is late submission allowed for the group report|"
                                 "I need until Friday for the lab write-up|can the thesis deadline be moved by two weeks",
                                 "ask for more time on an assignment"),
        "plagiarism_report": ("plagiarism|academic_misconduct|copied_work|integrity_case",
                              "work that was copied or not credited properly|a suspected breach of academic honesty|cheating",
                              "the similarity checker shows 68 percent match with a website|two students handed in identical code|"
                              "this essay reads exactly like a paper from 2019|a student used AI to write the whole assignment, against the rules|"
                              "sources were quoted without any references|someone shared the exam answers in a group chat",
                              "report copied or dishonest work"),
        "transcript_request": ("transcript|records_request|certificate_request|proof_of_enrolment",
                               "a student or graduate wants official records or certificates|requesting a transcript or diploma copy|records",
                               "I need an official transcript for my master's application|please send a certified copy of my diploma|"
                               "my employer wants proof that I am enrolled|can I get my grades in English for a visa|"
                               "how long does it take to issue a transcript|I graduated in 2015 and lost my certificate",
                               "ask for official records"),
    }},
    "legal_ops": {"key": "matter", "choice_q": "Which legal-ops track fits `{key}`?|Classify the matter `{key}`.|Who in legal should take `{key}`?|What kind of legal work is `{key}`?",
                  "concepts": {
        "nda_review": ("nda_review|confidentiality_agreement|nda|non_disclosure",
                       "a non-disclosure agreement needs to be checked or signed|reviewing an NDA before a deal|NDA",
                       "please review the mutual NDA from the supplier before Friday|can sales sign the vendor's NDA as is|"
                       "the startup wants a one-way NDA before the demo|mark up clause 5 of the confidentiality agreement|"
                       "do we have an NDA in place with Acme already|NDA template for a job candidate seeing our roadmap",
                       "concern a non-disclosure agreement"),
        "litigation_hold": ("litigation_hold|legal_hold|preservation_notice|evidence_hold",
                            "documents must be preserved because of a lawsuit or investigation|a hold on deleting records|hold",
                            "issue a legal hold on all email of the former sales director|we were served, preserve every file about Project Orion|"
                            "suspend the auto-delete policy for the finance share|custodians need to acknowledge the preservation notice|"
                            "can the hold on the 2021 records be released now|IT must not wipe the laptops involved in the dispute",
                            "ask for records to be preserved"),
        "gdpr_request": ("data_subject_request|gdpr_request|privacy_request|dsar",
                         "someone exercises their data protection rights over personal data|a privacy access or erasure request|DSAR",
                         "under Article 15 I request a copy of all personal data you hold on me|please erase my personal data under GDPR|"
                         "a customer wants to know who we shared her data with|we got a subject access request, the 30 days run out on the 9th|"
                         "correct the wrong date of birth in your records about me|object to my data being used for profiling",
                         "make a data protection request"),
        "contract_renewal": ("contract_renewal|renewal_notice|agreement_extension|auto_renewal",
                             "an existing agreement is about to renew or needs extending|deciding whether to renew a contract|renewal",
                             "the SaaS agreement auto-renews in 60 days, do we want to continue|extend the cleaning services contract by a year|"
                             "renewal quote from the vendor is 20 percent higher|notice period for not renewing the office lease is March 1|"
                             "please prepare an amendment to extend the MSA|which contracts expire this quarter",
                             "concern renewing a contract"),
        "compliance_training": ("compliance_training|mandatory_course|policy_training|training_reminder",
                                "staff must complete required training on rules or policies|a reminder about a mandatory course|training",
                                "the anti-bribery module is overdue for 40 employees|please complete the annual code of conduct training|"
                                "new hires need the data protection course in week one|export control training is mandatory for sales|"
                                "who hasn't finished the harassment prevention course|certificate for the AML training is missing",
                                "concern mandatory training"),
    }},
    "real_estate": {"key": "inquiry", "choice_q": "Which agent desk handles `{key}`?|What does the client want in `{key}`?|Classify the property inquiry `{key}`.|What is `{key}` about?",
                    "concepts": {
        "viewing_request": ("viewing|property_tour|open_house|showing",
                            "someone wants to go and see a property|arranging to look round a flat or house|tour",
                            "can we see the 2-bed on Elm Street this weekend|is the open house on Sunday still on|"
                            "I'd like a video tour of the loft before I travel|could I view the office space after 5pm|"
                            "we'd like a second look at the garden flat|book us in to see the cottage on Saturday",
                            "ask to see a property"),
        "maintenance_request": ("repair_request|maintenance|fix_needed|landlord_repair",
                                "a tenant reports something in the home that needs repairing|a request for building repairs|repair",
                                "the boiler has no hot water since yesterday|there's a leak under the kitchen sink|"
                                "the front door lock is jammed|mould growing in the bathroom ceiling|"
                                "the lift in block B is out of order|the radiator in the bedroom stays cold",
                                "ask for a repair"),
        "rent_arrears": ("rent_arrears|late_rent|overdue_rent|rent_payment",
                         "rent has not been paid on time|a tenant owes rent or asks about paying late|arrears",
                         "tenant in unit 4 is two months behind on rent|I'll be a week late with rent this month, sorry|"
                         "can I pay the arrears in instalments|rent not received for flat 12, send a reminder|"
                         "the standing order bounced, rent is outstanding|we owe 1,800 in back rent",
                         "concern unpaid rent"),
        "lease_termination": ("move_out|lease_end|notice_to_vacate|tenancy_end",
                              "a tenant or landlord wants to end a rental agreement|giving notice to leave a rented home|moving out",
                              "I'm giving my one month notice to leave the flat|can I break the lease early if I find a replacement|"
                              "the landlord served notice to vacate by June|when do I get the keys back to you at move-out|"
                              "we want to end the tenancy at the end of the fixed term|checkout inspection for my last day",
                              "give notice to end a tenancy"),
        "offer_submission": ("purchase_offer|bid|make_an_offer|offer_to_buy",
                             "a buyer wants to make an offer on a property|a bid to purchase a home|offer",
                             "we'd like to offer 410,000 for the townhouse|is the seller open to offers below asking|"
                             "submit our bid, subject to survey|we can go to 295k with a quick completion|"
                             "cash buyer here, offer attached for the bungalow|has our offer on the penthouse been accepted",
                             "make an offer to buy"),
    }},
    "insurance": {"key": "claim", "choice_q": "Which insurance team handles `{key}`?|What type of insurance case is `{key}`?|Classify `{key}` for the insurer.|What does the policyholder need in `{key}`?",
                  "concepts": {
        "auto_claim": ("car_claim|auto_claim|vehicle_accident|motor_claim",
                       "a claim for damage after a car accident|a motor insurance claim|car crash",
                       "someone rear-ended me at a red light, bumper is smashed|claim for my car after hitting a deer|"
                       "the other driver admits fault, how do I claim|windscreen cracked by a stone on the motorway|"
                       "my parked car was scraped and the driver left|the van was written off in the collision on Monday",
                       "report a car accident claim"),
        "property_damage": ("home_claim|property_damage|storm_damage|water_damage",
                            "a claim for damage to a house or its contents|a home insurance claim after flood, fire or storm|house damage",
                            "the storm blew tiles off our roof|a pipe burst and flooded the downstairs|"
                            "kitchen fire damaged the cabinets and ceiling|hail dented the conservatory and broke two windows|"
                            "a tree fell on the garden shed|water came through the ceiling from the flat above",
                            "report damage to a home"),
        "policy_quote": ("quote|new_policy|premium_quote|coverage_offer",
                         "someone wants a price for new insurance cover|asking how much a policy would cost|quote",
                         "how much would it cost to insure a 2019 Golf|quote for contents cover for a one-bed flat|"
                         "I'm starting a bakery, what would liability cover be|price for travel insurance for a family of four|"
                         "can you beat my renewal price of 540|what's the premium for a 30-year term life policy",
                         "ask for a price on new cover"),
        "coverage_question": ("coverage_question|policy_terms|is_it_covered|exclusions",
                              "asking whether something is included in an existing policy|questions about what the policy pays for|covered?",
                              "does my policy cover accidental damage to my laptop|am I covered if someone else drives my car|"
                              "is flood damage excluded on my home policy|what is the excess on my current plan|"
                              "does the travel policy pay for skiing injuries|are my bikes covered when left in the garage",
                              "ask what a policy covers"),
        "fraud_suspicion": ("suspected_fraud|claims_fraud|fraud_flag|staged_claim",
                            "a claim looks fake, staged or exaggerated|signs that someone is cheating the insurer|fraud",
                            "third claim for a stolen phone this year from the same customer|the repair invoice looks edited|"
                            "two 'accident' claims with the same passengers in different cities|the burglary was reported before the policy even started|"
                            "photos of the damage were taken from the internet|the clinic billed for treatments the claimant never had",
                            "suggest a fraudulent claim"),
    }},
}


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


# Training only: this share of training records has its gold concept in TRAIN_DOMAINS (the rest in DOMAINS).
TRAIN_NEW_DOMAIN_P = 0.5
# Training only: this share of training choice questions gets 11-20 options, all with descriptions (the
# held-out weakness was many options with descriptions). With the shared draw below (half of the rows pick
# k from a list where 3 of 10 sizes are >= 11, 70% have descriptions) the training share of 11-20-option
# questions with descriptions goes from ~10.5% to 0.2 + 0.8 * 0.105 = ~28%.
MANY_OPTIONS_P = 0.2
# Training only: concept pairs that never share a training choice question as gold and option, because the
# option would be a fair answer too (a refill request IS a health question). The held-out and calib
# splits keep their original option draw (which has a few such pairs, e.g. phishing / phish_click).
CLASHES = [("medical", c) for c in TRAIN_DOMAINS["healthcare_intake"]["concepts"]] + \
    [("legal", c) for c in TRAIN_DOMAINS["legal_ops"]["concepts"]] + \
    [("phishing", "phish_click"), ("billing", "invoice_mail"), ("spam_post", "newsletter"), ("medical", "selfharm"),
     ("exfil", "unsafe"), ("job", "onboarding"), ("legal", "payroll_error"), ("shipping", "lost_luggage"),
     ("complaint", "grade_appeal"), ("cancel", "gdpr_request"), ("meeting", "viewing_request"), ("bug", "maintenance_request"),
     ("billing", "rent_arrears"), ("invoice_mail", "rent_arrears"), ("cancel", "lease_termination"), ("refund", "auto_claim"),
     ("refund", "property_damage"), ("fraud_suspicion", "phishing"), ("meeting", "hotel_booking"), ("complaint", "flight_delay")]
CLASH = {}
for _a, _b in CLASHES:
    CLASH.setdefault(_a, set()).add(_b)
    CLASH.setdefault(_b, set()).add(_a)


class TrainPool(tuple):
    """A pool whose items are all training items (no held-out last item): the training-only domains'
    strings. Only the training part may draw from one."""


for _dom, _spec in TRAIN_DOMAINS.items():
    _spec["choice_q"] = TrainPool(_spec["choice_q"].split("|"))
    for _con, (_labels, _descs, _evidence, _stmt) in list(_spec["concepts"].items()):
        _spec["concepts"][_con] = (TrainPool(_labels.split("|")), TrainPool(_descs.split("|")),
                                   TrainPool(_evidence.split("|")), _stmt)
ALL_DOMAINS = {**DOMAINS, **TRAIN_DOMAINS}


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
        if isinstance(pool, TrainPool):
            if self.unseen:
                raise ValueError(f"the {self.name} part drew from a training-only pool")
            return rng.choice(pool)
        if self.name == "calib":
            return rng.choice(CALIB_POOLS[_pool_key(pool)])
        items = pool.split("|") if isinstance(pool, str) else list(pool)
        return rng.choice(items[-n_held:] if self.name == "held" else items[:-n_held])


def concept_pool() -> list[tuple[str, str]]:
    """(domain, concept) of the six DOMAINS, the only concepts the held-out and calib parts use."""
    return [(d, c) for d, spec in DOMAINS.items() for c in spec["concepts"]]


BASE_POOL = concept_pool()
NEW_POOL = [(d, c) for d, spec in TRAIN_DOMAINS.items() for c in spec["concepts"]]
assert not {c for _, c in BASE_POOL} & {c for _, c in NEW_POOL}, "concept names must be unique"
# training choice questions: the foreign options of a gold (dom, con), any domain, no clashing concept
TRAIN_FOREIGN = {(d, c): [o for o in BASE_POOL + NEW_POOL if o[0] != d and o[1] not in CLASH.get(c, ())]
                 for d, c in BASE_POOL + NEW_POOL}


def draw_concept(rng: random.Random, part: Part) -> tuple[str, str]:
    """The gold (domain, concept) of a record: held-out and calib exactly as before (one rng.choice over
    concept_pool()); training from TRAIN_DOMAINS with TRAIN_NEW_DOMAIN_P, else from DOMAINS."""
    if part.unseen:
        return rng.choice(concept_pool())
    return rng.choice(NEW_POOL if rng.random() < TRAIN_NEW_DOMAIN_P else BASE_POOL)


def choice_instructions(dom: str):
    return CHOICE_Q[dom] if dom in CHOICE_Q else TRAIN_DOMAINS[dom]["choice_q"]


def evidence(dom: str, con: str, rng: random.Random, part: Part) -> str:
    return part.pick(rng, ALL_DOMAINS[dom]["concepts"][con][2])


def make_state(rng: random.Random, dom: str, con: str, part: Part, level: int, negate_other: bool) -> tuple[dict, str | None]:
    """A dict state {key: text}; the text names `con`, carries the level-`level` cue of a random score
    dimension and, when negate_other, a negated or past mention of another concept (the distractor)."""
    key = ALL_DOMAINS[dom]["key"]
    dim = rng.choice(sorted(SCORES))
    cue = part.pick(rng, SCORES[dim]["cues"][level])
    other = None
    dis = ""
    if negate_other:
        other = rng.choice([c for c in ALL_DOMAINS[dom]["concepts"] if c != con])
        frame = part.pick(rng, rng.choice(DISTRACTORS))
        dis = frame.format(x=evidence(dom, other, rng, part))
    template = part.pick(rng, TEMPLATES, N_HELD_TEMPLATES)
    text = template.format(ev=evidence(dom, con, rng, part), dis=dis, cue=cue)
    text = " ".join(text.split())
    return {key: text[0].upper() + text[1:], "_dim": dim}, other


def choice_record(rng: random.Random, part: Part, coded_label_p: float = CODED_LABEL_P) -> dict:
    dom, con = draw_concept(rng, part)
    spec = ALL_DOMAINS[dom]
    state, other = make_state(rng, dom, con, part, rng.randrange(5), rng.random() < 0.5)
    state.pop("_dim")
    many = not part.unseen and rng.random() < MANY_OPTIONS_P  # training only: see MANY_OPTIONS_P
    if many:
        k = rng.randint(11, 20)
    else:
        k = rng.choice([2, 3, 4, 5, 6, 8, 10, 12, 16, 20]) if rng.random() < 0.5 else rng.randint(2, 7)
    same = [c for c in spec["concepts"] if c != con]
    rng.shuffle(same)
    if other is not None:  # the distractor concept is among the options when there is room
        same.remove(other)
        same.insert(0, other)
    foreign = [c for c in concept_pool() if c[0] != dom] if part.unseen else list(TRAIN_FOREIGN[(dom, con)])
    rng.shuffle(foreign)
    picked = [(dom, c) for c in same][:k - 1]
    picked += foreign[:k - 1 - len(picked)]
    options = [(dom, con)] + picked
    rng.shuffle(options)
    with_desc = many or rng.random() < 0.7
    # Training only: now and then the labels are bare codes, so only the descriptions tell the options
    # apart (the model has to read them, not remember label words). Held-out and calib never draw here.
    codes = None
    if not part.unseen and with_desc and rng.random() < coded_label_p:
        codes = rng.choice(CODE_STYLES)
    criteria = {}
    gold_label = None
    for i, (d, c) in enumerate(options):
        labels, descs = ALL_DOMAINS[d]["concepts"][c][:2]
        label = part.pick(rng, labels) if codes is None else codes(i)
        while label in criteria:  # label variants never collide in practice; keep it safe
            label += "_"
        criteria[label] = part.pick(rng, descs) if with_desc else None
        if c == con and d == dom:
            gold_label = label
    key = spec["key"]
    instructions = part.pick(rng, choice_instructions(dom)).format(key=key)
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
    dom, con = draw_concept(rng, part)
    level = rng.randrange(5)
    state, _ = make_state(rng, dom, con, part, level, rng.random() < 0.3)
    dim = state.pop("_dim")
    key = ALL_DOMAINS[dom]["key"]
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
    dom, con = draw_concept(rng, part)
    spec = ALL_DOMAINS[dom]
    truth = rng.random() < 0.5
    asked = con if truth else rng.choice([c for c in spec["concepts"] if c != con])
    # Half of the false cases are hard: the state mentions the asked concept, negated or in the past.
    hard = not truth and rng.random() < 0.5
    state, _ = make_state(rng, dom, con, part, rng.randrange(5), False)
    state.pop("_dim")
    key = spec["key"]
    text = state[key]
    if hard:
        frames = rng.choice(DISTRACTORS)
        # held-out / calib: the pool as before (held draws its last item, the held-out negation frame).
        # Training: the training frames of both pools; "frames|NEGATED" as one pool would hand training the
        # held-out distractor frame (last of `frames`, not last of the joined pool).
        pool = frames + "|" + NEGATED if part.unseen else TrainPool(split(frames, False) + split(NEGATED, False))
        clause = part.pick(rng, pool).format(x=evidence(dom, asked, rng, part))
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
