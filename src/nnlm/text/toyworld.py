"""The built-in toy-world corpus: sentences from a small grammar with word classes.

In the spirit of the paper's motivating example: having seen "the cat is walking in the
bedroom", a model that shares statistical strength between similar words should find "a
dog was running in a room" likely too, although no count supports it. The grammar has
word classes (determiners, animals, people, auxiliaries, activities, places, foods,
adjectives); animals and people each have activities of their own, and one (subject,
activity) pair per subject is held out of train and valid and appears only in test. A
count model can only back off to "what follows *was*"; a model that has learned that a
dog is like a cat knows what dogs do.

Deterministic: the same seed gives the same sentences on every platform.
"""

from __future__ import annotations

import random

DETERMINERS = ["the", "a"]
ANIMALS = ["cat", "dog", "mouse", "rabbit", "horse", "fox"]
PEOPLE = ["man", "woman", "boy", "girl", "teacher", "doctor"]
AUXILIARIES = ["is", "was"]
ANIMAL_ACTIVITIES = ["walking", "running", "sleeping", "playing", "jumping", "hiding"]
PEOPLE_ACTIVITIES = ["reading", "singing", "working", "cooking", "sitting", "talking"]
PLACES = ["bedroom", "room", "kitchen", "garden", "hall", "yard"]
FOODS = ["bread", "cake", "soup", "cheese", "pie", "carrot"]
ADJECTIVES = ["hungry", "tired", "happy", "small", "quiet", "busy"]
SUBJECTS = ANIMALS + PEOPLE
ACTIVITIES = ANIMAL_ACTIVITIES + PEOPLE_ACTIVITIES

# what each kind of subject does: animals and people have activities of their own
ACTIVITIES_OF = {**{a: ANIMAL_ACTIVITIES for a in ANIMALS},
                 **{p: PEOPLE_ACTIVITIES for p in PEOPLE}}

# each subject has one of its activities it never does in train or valid
HELD_OUT_PAIRS = frozenset({
    ("cat", "sleeping"), ("dog", "running"), ("mouse", "playing"), ("rabbit", "jumping"),
    ("horse", "hiding"), ("fox", "walking"), ("man", "reading"), ("woman", "singing"),
    ("boy", "working"), ("girl", "cooking"), ("teacher", "sitting"), ("doctor", "talking"),
})

# sentences whose (subject, activity) pair train never shows; they open the test split
HELD_OUT_EXAMPLES = [
    "a dog was running in a room",
    "the cat is sleeping in the kitchen",
    "a mouse was playing in the garden",
    "the boy is working in a hall",
]
SEEN_EXAMPLE = "the cat is walking in the bedroom"
assert ("cat", "walking") not in HELD_OUT_PAIRS


def _sentence(rng: random.Random, held_out: bool) -> str:
    """One sentence; with ``held_out`` its (subject, activity) pair is a held-out one."""
    det = rng.choice
    if held_out:
        subject, activity = rng.choice(sorted(HELD_OUT_PAIRS))
        template = rng.choice(["place", "bare"])
    else:
        template = rng.choices(["place", "bare", "eat", "adj"], weights=[5, 2, 2, 2])[0]
        subject = rng.choice(PEOPLE if template == "eat" else SUBJECTS)
        activity = rng.choice(
            [a for a in ACTIVITIES_OF[subject] if (subject, a) not in HELD_OUT_PAIRS])
    words = [det(DETERMINERS), subject, rng.choice(AUXILIARIES)]
    if template == "place":
        words += [activity, "in", det(DETERMINERS), rng.choice(PLACES)]
    elif template == "bare":
        words += [activity]
    elif template == "eat":
        words += ["eating", det(DETERMINERS), rng.choice(FOODS)]
    else:
        words += [rng.choice(ADJECTIVES)]
    return " ".join(words)


def toy_world(
    seed: int = 0, n_train: int = 4000, n_valid: int = 500, n_test: int = 500
) -> tuple[list[str], list[str], list[str]]:
    """Train, valid and test sentences. Train and valid never contain a held-out pair;
    test opens with :data:`HELD_OUT_EXAMPLES`, then alternates held-out and ordinary
    sentences."""
    rng = random.Random(seed)
    train = [_sentence(rng, held_out=False) for _ in range(n_train)]
    train[0] = SEEN_EXAMPLE
    valid = [_sentence(rng, held_out=False) for _ in range(n_valid)]
    test = list(HELD_OUT_EXAMPLES)
    test += [_sentence(rng, held_out=i % 2 == 0) for i in range(max(0, n_test - len(test)))]
    return train, valid, test[: max(n_test, len(HELD_OUT_EXAMPLES))]


def has_held_out_pair(sentence: str) -> bool:
    words = sentence.split()
    return any((s, a) in HELD_OUT_PAIRS for s, a in zip(words, words[2:]))
