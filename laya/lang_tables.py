"""Data behind `laya.lang`: Unicode ranges, function-word lists and marker sets (compat-0.4.15 §4.4, §4.10).

Facts about the published routing behaviour, kept apart from the rules so the rules stay readable.
"""

from __future__ import annotations

# Letters assigned after Unicode 14: an interpreter with an older database reports them as Cn (unassigned).
NEWER_LETTER_RANGES = (
    (0x1C89, 0x1C8A), (0xA7CB, 0xA7CD), (0xA7DA, 0xA7DC), (0x10570, 0x1057A), (0x1057C, 0x1058A),
    (0x1058C, 0x10592), (0x10594, 0x10595), (0x10597, 0x105A1), (0x105A3, 0x105B1), (0x105B3, 0x105B9),
    (0x105BB, 0x105BC), (0x105C0, 0x105F3), (0x10D4A, 0x10D65), (0x10D6F, 0x10D85), (0x10EC2, 0x10EC4),
    (0x10F70, 0x10F81), (0x1123F, 0x11240), (0x11380, 0x11389), (0x1138B, 0x1138B), (0x1138E, 0x1138E),
    (0x11390, 0x113B5), (0x113B7, 0x113B7), (0x113D1, 0x113D1), (0x113D3, 0x113D3), (0x11BC0, 0x11BE0),
    (0x11F02, 0x11F02), (0x11F04, 0x11F10), (0x11F12, 0x11F33), (0x12F90, 0x12FF0), (0x1342F, 0x1342F),
    (0x13441, 0x13446), (0x13460, 0x143FA), (0x16100, 0x1611D), (0x16A70, 0x16ABE), (0x16D40, 0x16D6C),
    (0x18CFF, 0x18CFF), (0x1B132, 0x1B132), (0x1B155, 0x1B155), (0x1DF25, 0x1DF2A), (0x1E030, 0x1E06D),
    (0x1E290, 0x1E2AD), (0x1E4D0, 0x1E4EB), (0x1E5D0, 0x1E5ED), (0x1E5F0, 0x1E5F0), (0x2B739, 0x2B739),
    (0x2EBF0, 0x2EE5D), (0x31350, 0x323AF),
)

# Latin letters (besides every letter below U+02B0); Latin Extended-C/D are deliberately not Latin.
LATIN_RANGES = ((0x1E00, 0x1EFF), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A))

# (first, last, script); a letter in none of these (and not Latin) is "other".
SCRIPT_RANGES = (
    (0x0370, 0x03FF, "greek"), (0x1F00, 0x1FFF, "greek"),
    (0x0400, 0x052F, "cyrillic"), (0x2DE0, 0x2DFF, "cyrillic"), (0xA640, 0xA69F, "cyrillic"),
    (0x0530, 0x058F, "armenian"), (0x0590, 0x05FF, "hebrew"),
    (0x0600, 0x06FF, "arabic"), (0x0750, 0x077F, "arabic"), (0x08A0, 0x08FF, "arabic"),
    (0xFB50, 0xFDFF, "arabic"), (0xFE70, 0xFEFF, "arabic"),
    (0x0900, 0x097F, "devanagari"), (0xA8E0, 0xA8FF, "devanagari"), (0x0980, 0x09FF, "bengali"),
    (0x0A00, 0x0A7F, "gurmukhi"), (0x0A80, 0x0AFF, "gujarati"), (0x0B00, 0x0B7F, "oriya"),
    (0x0B80, 0x0BFF, "tamil"), (0x0C00, 0x0C7F, "telugu"), (0x0C80, 0x0CFF, "kannada"),
    (0x0D00, 0x0D7F, "malayalam"), (0x0D80, 0x0DFF, "sinhala"), (0x0E00, 0x0E7F, "thai"),
    (0x0E80, 0x0EFF, "lao"), (0x0F00, 0x0FFF, "tibetan"), (0x1000, 0x109F, "myanmar"),
    (0x10A0, 0x10FF, "georgian"), (0x1200, 0x137F, "ethiopic"), (0x1780, 0x17FF, "khmer"),
    (0x1100, 0x11FF, "hangul"), (0x3130, 0x318F, "hangul"), (0xAC00, 0xD7AF, "hangul"),
    (0x3040, 0x309F, "kana"), (0x30A0, 0x30FF, "kana"), (0x31F0, 0x31FF, "kana"),
    (0x3400, 0x4DBF, "han"), (0x4E00, 0x9FFF, "han"), (0xF900, 0xFAFF, "han"),
)
SCRIPTS = tuple(dict.fromkeys(script for _, _, script in SCRIPT_RANGES))

NON_ENGLISH_LETTERS = frozenset("ßàáâãäåæçèéêëìíîïñòóôõöøùúûüýÿāăąćčďđēęěğģīıķļłńņňőœřśşšţťūůűźżžșțə")

# Function words by language; ties between languages go to the earlier one in this order (after "en").
_WORDS = {
    "en": "after already always and any are aren as at be because been before being between both but can could "
          "couldn didn didnt does doesn doesnt doing done dont down during each ever every few for from has hasn "
          "have haven havent here him his how i if in into is isn isnt it ive many might much must never nor not "
          "of on only onto our please shall she should some than that thats the their them then there these they "
          "this those through to too until very was wasn wasnt we were weren what whats when where which while "
          "who whom why will with within without won wont would wouldn yet you your youre yours",
    "fr": "alors au aux avec bien bonjour ce ces cette comment dans des deux dois doit donc du elle elles est et "
          "fait fois il ils je jour jours la le les ma mais merci mes mois mon nous ont ou pas peut peux plus pour "
          "pourquoi quand que qui sa ses sont sur ta tes ton tous tout toute trois très tu une veut veux vous être",
    "de": "aber auch auf aus bei bitte das dem den der dich die diese diesen dieser dieses dir ein eine einem "
          "einen einer für gibt habe haben heute ich im in ist jetzt kann kannst mein meine meinem meinen meiner "
          "mich mir mit nach nicht noch oder sich sind und uns von wann was welche werden wie wir wird wo wurde zu "
          "zum zur",
    "es": "al algo aquí aunque como con cuando del donde dos el entre es esa ese eso esta este esto está fue "
          "fueron gracias han hay hemos hoy la las le les lo los mi muy más nada necesito ni nos para pero por "
          "porque puede pueden que quiero se ser sobre son su sus también tengo tiene tienen todo tres tu un una "
          "y ya",
    "pt": "agora ainda alguem alguém ali antes ao aos aqui as até boa cadê com como consigo da das depois deu do "
          "dois dos e em entao então era esta estamos estava este estou está eu ficou fiz foi gostaria hoje isso "
          "isto ja já mais mas meu meus minha minhas muito na nada nao nas nenhum nenhuma ninguem ninguém noite "
          "nos nossa nosso não o obrigada obrigado olá onde ontem os para pela pelo pode podem por porque pra "
          "preciso quando que quero sao se ser seu sou sua são tambem também tarde tem tenho três tudo tá um uma "
          "vc vcs voce voces você vocês é",
    "it": "abbiamo adesso agli alla alle anche ancora avete che ci ciao col come con da dagli dal dalla dallo "
          "degli dei del della delle dello deve devo devono di dove e ed era fra già gli grazie ha hai hanno ho "
          "ieri il la le lo mai mi mia mio molto ne negli nel nell nella non o oggi per perche più poco quando "
          "questa questo scusa sempre si sono stata stato su sua sul sulla sulle tra tuo un una uno voglio vorrei è",
    "nl": "aan dat deze door een het is maar met naar niet ook op te van voor worden wordt zijn",
    "sv": "appen aterbetala aterbetalning att behover behöver blivit debiterade dessa detta faktura fel från får "
          "ganger gång gånger gör göra hittar hjalp hjalpa hjälp hjälpa här installningarna installningen "
          "inställningarna inställningen inte jag kommer kraschar kvittot losenord lösenord mig min mitt måste nar "
          "när nästa och också om oppnar paket ska skicka skulle sparningen spårningen säger till tva två upp "
          "uppdaterats utan vi vill är återbetala återbetalning öppnar",
    "ro": "aceasta această acest acesta acum ale care dar din după este foarte fost fără lui mi nu pentru până "
          "sunt să trebuie vreau vă în și ți",
    "bn": "abar ajke akhon amader amake amar ami amra apnake apnar apnara apni ar asbe bhai bhalo bolte bolun chai "
          "chaina dhonnobad dilam dite diye diyechi dorkar duibar ei eita ekbar ekhon ekhono ekta ferot geche gese "
          "hobe hocche hoise hoye hoyeche hoyni jabe jodi jonno kalke keno keu kharap khub ki kibhabe kichu kintu "
          "kivabe kobe kokhon korbo korchi kore koreche korechi koren korlam korsi korte korun kothay koto lagbe "
          "moddhe nai niye oi oita onek ota pabo paini parben parbo parchi parchina peyechi sathe shathe shob "
          "shomossa somossa tader tahole taka theke tomake tomar tomra tumi valo",
    "az": "amma ancaq artiq artıq bir biz bu cox daha deyil də eger görə həm hər ile ilə isə kimi lakin mən nə "
          "olan olmasa olub onlar siz sonra sən ucun var ve və yalniz yalnız yox yoxdur çox üçün əgər",
}
STOP_WORDS = {lang: frozenset(words.split()) for lang, words in _WORDS.items()}
LANGUAGE_ORDER = ("fr", "de", "es", "pt", "it", "nl", "sv", "ro", "bn", "az")

SHORT_SWEDISH_MARKERS = frozenset(
    "abonnemanget aterbetalning atkomst behover behöver betalningen fakturan felmeddelande glomt glömt "
    "inloggningen installningen inställningen kvitto kvittot losenord lösenord sparningen spårningen "
    "återbetalning åtkomst".split())
NORDIC_MARKERS = frozenset("får hej ja jo kommer mig min nej om skulle tack vi".split())
# Words common enough across languages that repeating them proves nothing: each counts once.
COLLISION_WORDS = frozenset("care come do im per plus son todo".split())


def _shared_words() -> frozenset:
    seen: dict[str, int] = {}
    for words in STOP_WORDS.values():
        for word in words:
            seen[word] = seen.get(word, 0) + 1
    return frozenset(w for w, n in seen.items() if n > 1) | NORDIC_MARKERS


SHARED_WORDS = _shared_words()
ENGLISH_ONLY_WORDS = STOP_WORDS["en"] - SHARED_WORDS
