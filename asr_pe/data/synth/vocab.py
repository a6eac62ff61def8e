"""Fixed English vocabulary of the synthetic corpus, grouped by part of speech.

The word list is closed so that a small model can learn every word, and it avoids
homographs whose pronunciation depends on meaning (read, lead, live, close, wind, tear,
record, minute, ...), abbreviations, digits and proper names that espeak-ng would spell
or read unpredictably. American spelling throughout. Every word matches ``[a-z']+``.
Verbs are ``(base, third person singular, past)`` triples so the generator can make
subjects and verbs agree.
"""

from __future__ import annotations

import re

# ---------------------------------------------------------------- function words
SINGULAR_DETERMINERS = (
    "the", "a", "this", "that", "every", "my", "your", "his", "her", "our", "their",
    "one",
)
PLURAL_DETERMINERS = (
    "the", "some", "many", "these", "those", "two", "three", "four", "five", "six",
    "seven", "eight", "nine", "ten", "my", "our", "their", "your", "several",
)
# "an" is chosen by the generator before a vowel sound.
ARTICLE_AN = "an"

SUBJECT_PRONOUNS = ("i", "you", "he", "she", "we", "they")
THIRD_PERSON_PRONOUNS = ("he", "she")
OBJECT_PRONOUNS = ("me", "you", "him", "her", "us", "them", "it")
PREPOSITIONS = (
    "in", "on", "under", "near", "behind", "beside", "inside", "across", "along",
    "around", "through", "over", "into", "toward", "by", "from", "with", "past",
    "above", "below",
)
CONJUNCTIONS = ("and", "but", "so", "because", "while", "when", "before", "after")
MODALS = ("can", "will", "should", "could", "must", "might", "may", "would")
QUESTION_WORDS = ("what", "where", "when", "why", "how", "who")
AUXILIARIES = ("does", "did", "do", "am", "is", "was", "are", "were", "has", "have", "had")
INTENSIFIERS = ("very", "really", "quite", "rather", "too", "so")
MISC_WORDS = (
    "there", "here", "please", "not", "yes", "no", "also", "still", "never", "always",
    "often", "sometimes", "usually", "it", "again", "then", "now", "of", "to", "at",
    "for", "more", "that", "coming", "back",
)
CONTRACTIONS = (
    "don't", "doesn't", "didn't", "can't", "won't", "isn't", "wasn't", "it's", "i'm",
    "we're", "they're", "she's", "he's", "that's", "there's", "let's",
)
NUMBER_WORDS = (
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "twenty",
)

# ---------------------------------------------------------------- nouns
PERSON_NOUNS = (
    "man", "woman", "boy", "girl", "child", "teacher", "doctor", "farmer", "driver",
    "baker", "nurse", "friend", "neighbor", "student", "pilot", "singer", "painter",
    "cook", "king", "queen", "soldier", "sailor", "stranger", "brother", "sister",
    "mother", "father", "uncle", "aunt", "cousin", "captain", "guard", "waiter",
    "writer", "worker", "player", "dancer", "lawyer", "artist", "fisherman",
    "grandmother", "grandfather", "baby", "officer", "engineer", "gardener",
    "shopkeeper", "traveler", "visitor", "prince", "princess", "carpenter", "hunter",
)
PERSON_NOUNS_PLURAL = (
    "men", "women", "boys", "girls", "children", "teachers", "doctors", "farmers",
    "drivers", "nurses", "friends", "neighbors", "students", "workers", "players",
    "visitors",
)
ANIMAL_NOUNS = (
    "dog", "cat", "horse", "bird", "cow", "fox", "rabbit", "mouse", "duck", "goat",
    "sheep", "pig", "chicken", "frog", "bear", "lion", "tiger", "monkey", "wolf",
    "squirrel", "owl", "donkey", "puppy", "kitten", "turtle", "elephant",
)
ANIMAL_NOUNS_PLURAL = (
    "dogs", "cats", "horses", "birds", "cows", "rabbits", "mice", "ducks", "goats",
    "pigs", "chickens", "bears",
)
THING_NOUNS = (
    "book", "letter", "box", "cup", "bottle", "chair", "table", "door", "window", "key",
    "coat", "hat", "shoe", "bag", "ball", "map", "phone", "clock", "lamp", "pen",
    "pencil", "picture", "basket", "bucket", "blanket", "candle", "coin", "ring",
    "rope", "stone", "stick", "shirt", "jacket", "umbrella", "ladder", "hammer",
    "bicycle", "car", "boat", "train", "plate", "bowl", "spoon", "fork", "knife",
    "glass", "jar", "mirror", "sock", "glove", "scarf", "wallet", "ticket", "newspaper",
    "notebook", "radio", "camera", "computer", "pot", "pan", "bench", "fence", "gate",
    "wheel", "flag", "kite", "guitar", "piano", "brush", "soap", "bell", "truck",
    "flower", "tree", "leaf", "apple", "orange", "banana", "lemon", "cake", "pie",
    "sandwich", "egg", "onion", "potato", "carrot", "tomato", "cookie", "photo", "toy",
    "game", "song", "story", "poem", "message", "gift", "list", "page",
)
THING_NOUNS_PLURAL = (
    "books", "letters", "boxes", "cups", "bottles", "chairs", "keys", "coats", "hats",
    "shoes", "bags", "balls", "maps", "plates", "tickets", "apples", "oranges",
    "bananas", "cakes", "eggs", "cookies", "flowers", "trees", "leaves", "toys",
    "songs", "stories", "gifts", "cards", "tools",
)
FOOD_NOUNS = (
    "bread", "soup", "tea", "coffee", "milk", "water", "rice", "cheese", "butter",
    "honey", "juice", "sugar", "salt", "pepper", "meat", "fish", "pasta", "salad",
    "jam", "cream", "chocolate", "fruit", "corn", "beans",
)
MEAL_NOUNS = ("breakfast", "lunch", "dinner", "supper")
PLACE_NOUNS = (
    "park", "kitchen", "garden", "market", "station", "school", "river", "forest",
    "village", "city", "house", "room", "street", "bridge", "beach", "hill", "field",
    "shop", "office", "library", "hospital", "farm", "lake", "road", "island", "valley",
    "mountain", "garage", "hall", "yard", "camp", "museum", "bakery", "castle", "barn",
    "bedroom", "bathroom", "classroom", "zoo",
)
TIME_NOUNS = (
    "morning", "afternoon", "evening", "night", "week", "month", "year", "day",
    "weekend", "summer", "winter", "spring", "autumn", "monday", "tuesday", "wednesday",
    "thursday", "friday", "saturday", "sunday",
)
WEATHER_NOUNS = ("rain", "snow", "sun", "fog", "storm", "weather", "sky", "cloud")

# ---------------------------------------------------------------- verbs
# Transitive verbs that take a thing as object.
THING_VERBS = (
    ("find", "finds", "found"), ("open", "opens", "opened"),
    ("carry", "carries", "carried"), ("hold", "holds", "held"),
    ("buy", "buys", "bought"), ("sell", "sells", "sold"),
    ("bring", "brings", "brought"), ("take", "takes", "took"),
    ("make", "makes", "made"), ("paint", "paints", "painted"),
    ("clean", "cleans", "cleaned"), ("wash", "washes", "washed"),
    ("fix", "fixes", "fixed"), ("break", "breaks", "broke"),
    ("drop", "drops", "dropped"), ("lift", "lifts", "lifted"),
    ("push", "pushes", "pushed"), ("pull", "pulls", "pulled"),
    ("want", "wants", "wanted"), ("need", "needs", "needed"),
    ("like", "likes", "liked"), ("keep", "keeps", "kept"), ("hide", "hides", "hid"),
    ("send", "sends", "sent"), ("write", "writes", "wrote"), ("draw", "draws", "drew"),
    ("throw", "throws", "threw"), ("catch", "catches", "caught"),
    ("fill", "fills", "filled"), ("check", "checks", "checked"),
    ("move", "moves", "moved"), ("share", "shares", "shared"),
    ("pack", "packs", "packed"), ("pick", "picks", "picked"), ("lose", "loses", "lost"),
    ("order", "orders", "ordered"), ("touch", "touches", "touched"),
    ("choose", "chooses", "chose"), ("forget", "forgets", "forgot"),
    ("remember", "remembers", "remembered"), ("see", "sees", "saw"),
    ("watch", "watches", "watched"), ("drive", "drives", "drove"),
    ("sweep", "sweeps", "swept"), ("repair", "repairs", "repaired"),
    ("collect", "collects", "collected"), ("return", "returns", "returned"),
)
# Transitive verbs that take a food or drink object.
FOOD_VERBS = (
    ("eat", "eats", "ate"), ("cook", "cooks", "cooked"), ("bake", "bakes", "baked"),
    ("taste", "tastes", "tasted"), ("drink", "drinks", "drank"),
    ("serve", "serves", "served"), ("boil", "boils", "boiled"),
    ("enjoy", "enjoys", "enjoyed"), ("prepare", "prepares", "prepared"),
    ("buy", "buys", "bought"), ("bring", "brings", "brought"),
)
# Transitive verbs that take a person or animal as object.
PERSON_VERBS = (
    ("help", "helps", "helped"), ("call", "calls", "called"), ("meet", "meets", "met"),
    ("visit", "visits", "visited"), ("follow", "follows", "followed"),
    ("thank", "thanks", "thanked"), ("greet", "greets", "greeted"),
    ("invite", "invites", "invited"), ("teach", "teaches", "taught"),
    ("answer", "answers", "answered"), ("feed", "feeds", "fed"),
    ("carry", "carries", "carried"), ("miss", "misses", "missed"),
    ("wake", "wakes", "woke"), ("find", "finds", "found"), ("see", "sees", "saw"),
    ("hear", "hears", "heard"), ("love", "loves", "loved"), ("tell", "tells", "told"),
    ("ask", "asks", "asked"), ("pay", "pays", "paid"), ("join", "joins", "joined"),
)
# Intransitive verbs.
INTRANSITIVE_VERBS = (
    ("sleep", "sleeps", "slept"), ("wait", "waits", "waited"),
    ("look", "looks", "looked"), ("smile", "smiles", "smiled"),
    ("laugh", "laughs", "laughed"), ("run", "runs", "ran"), ("walk", "walks", "walked"),
    ("sing", "sings", "sang"), ("dance", "dances", "danced"), ("swim", "swims", "swam"),
    ("jump", "jumps", "jumped"), ("sit", "sits", "sat"), ("stand", "stands", "stood"),
    ("work", "works", "worked"), ("play", "plays", "played"),
    ("rest", "rests", "rested"), ("cry", "cries", "cried"),
    ("shout", "shouts", "shouted"), ("travel", "travels", "traveled"),
    ("arrive", "arrives", "arrived"), ("stay", "stays", "stayed"),
    ("listen", "listens", "listened"), ("talk", "talks", "talked"),
    ("hurry", "hurries", "hurried"), ("fall", "falls", "fell"),
    ("dream", "dreams", "dreamed"), ("wave", "waves", "waved"),
    ("climb", "climbs", "climbed"), ("hide", "hides", "hid"), ("fly", "flies", "flew"),
    ("study", "studies", "studied"), ("begin", "begins", "began"),
    ("leave", "leaves", "left"), ("come", "comes", "came"), ("go", "goes", "went"),
)
# Verbs that take a clause ("she thinks that ...").
CLAUSE_VERBS = (
    ("think", "thinks", "thought"), ("know", "knows", "knew"), ("say", "says", "said"),
    ("hope", "hopes", "hoped"), ("believe", "believes", "believed"),
    ("feel", "feels", "felt"),
)
COPULA_PRESENT = ("is", "are")
COPULA_PAST = ("was", "were")

# ---------------------------------------------------------------- modifiers
ADJECTIVES = (
    "old", "young", "small", "big", "little", "tall", "short", "long", "red", "blue",
    "green", "yellow", "white", "black", "brown", "gray", "pink", "orange", "purple",
    "happy", "sad", "quiet", "loud", "busy", "lazy", "clever", "kind", "brave", "angry",
    "tired", "hungry", "warm", "cold", "hot", "cool", "wet", "dry", "clean", "dirty",
    "new", "heavy", "soft", "hard", "round", "flat", "sharp", "bright", "dark", "empty",
    "full", "strong", "weak", "pretty", "funny", "strange", "famous", "friendly",
    "gentle", "careful", "shy", "proud", "calm", "early", "late", "simple", "cheap",
    "fresh", "sweet", "wooden", "golden", "silver", "thick", "thin", "wide", "deep",
    "quick", "slow", "cheerful", "tiny", "huge", "fine", "nice", "good", "bad", "great",
    "lovely", "useful", "broken", "modern", "favorite", "beautiful", "delicious",
    "expensive", "important", "comfortable", "dangerous", "difficult", "easy", "safe",
    "sunny", "rainy", "windy", "cloudy",
)
WEATHER_ADJECTIVES = (
    "cold", "warm", "hot", "wet", "dry", "sunny", "rainy", "windy", "cloudy", "calm",
    "dark", "bright", "quiet", "lovely", "strange", "cool",
)
MANNER_ADVERBS = (
    "slowly", "quickly", "quietly", "loudly", "carefully", "happily", "sadly", "gently",
    "early", "late", "again", "together", "outside", "inside", "upstairs", "downstairs",
    "soon", "later", "twice", "once", "well", "suddenly", "finally",
)
TIME_ADVERBS = ("today", "tonight", "yesterday", "tomorrow", "now", "then", "soon")
TIME_PHRASE_HEADS = ("last", "next", "every", "this")

ALL_GROUPS = {
    name: value
    for name, value in globals().items()
    if name.isupper() and isinstance(value, tuple)
}

_WORD_RE = re.compile(r"[a-z']+")


def _flatten(group: tuple) -> list[str]:
    words: list[str] = []
    for item in group:
        words.extend(item if isinstance(item, tuple) else (item,))
    return words


def vocabulary() -> tuple[str, ...]:
    """The sorted set of every word the generator can emit."""
    words = {word for group in ALL_GROUPS.values() for word in _flatten(group)}
    words.add(ARTICLE_AN)
    return tuple(sorted(words))


def _check_vocabulary() -> None:
    bad = [w for w in vocabulary() if not _WORD_RE.fullmatch(w)]
    assert not bad, f"vocabulary words outside [a-z']: {bad}"
    for name, group in ALL_GROUPS.items():
        if name.endswith("_VERBS"):
            assert all(len(v) == 3 for v in group), f"{name}: verbs must be (base, 3sg, past)"


_check_vocabulary()
