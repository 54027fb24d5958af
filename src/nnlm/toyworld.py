"""The built-in toy-world corpus: sentences from a small grammar with word classes.

In the spirit of the paper's motivating example: having seen "the cat is walking in the
bedroom", a model that shares statistical strength between similar words should find "a
dog was running in a room" likely too, although no count supports it. The grammar has
word classes (determiners, animals, people, auxiliaries, activities, places, foods,
adjectives); some (subject, activity) pairs are held out of train and valid and appear
only in test, so test measures exactly that generalisation.

Deterministic: the same seed gives the same sentences on every platform.
"""

from __future__ import annotations

import random

DETERMINERS = ["the", "a"]
ANIMALS = ["cat", "dog", "mouse", "rabbit", "horse", "fox"]
PEOPLE = ["man", "woman", "boy", "girl", "teacher", "doctor"]
AUXILIARIES = ["is", "was"]
ACTIVITIES = ["walking", "sleeping", "running", "playing", "sitting", "jumping"]
PLACES = ["bedroom", "room", "kitchen", "garden", "hall", "yard"]
FOODS = ["bread", "cake", "soup", "cheese", "pie", "carrot"]
ADJECTIVES = ["hungry", "tired", "happy", "small", "quiet", "busy"]
SUBJECTS = ANIMALS + PEOPLE

# each subject has one activity it never does in train; (dog, running) is among them
HELD_OUT_PAIRS = frozenset(
    (subject, ACTIVITIES[(i + 1) % len(ACTIVITIES)]) for i, subject in enumerate(SUBJECTS)
)
assert {("dog", "running"), ("cat", "sleeping"), ("mouse", "playing"), ("boy", "playing")} \
    <= HELD_OUT_PAIRS
assert ("cat", "walking") not in HELD_OUT_PAIRS

# sentences whose (subject, activity) pair train never shows; they open the test split
HELD_OUT_EXAMPLES = [
    "a dog was running in a room",
    "the cat is sleeping in the kitchen",
    "a mouse was playing in the garden",
    "the boy is playing in a hall",
]
SEEN_EXAMPLE = "the cat is walking in the bedroom"


def _sentence(rng: random.Random, held_out: bool) -> str:
    """One sentence; with ``held_out`` its (subject, activity) pair is a held-out one."""
    det = rng.choice
    if held_out:
        subject, activity = rng.choice(sorted(HELD_OUT_PAIRS))
        template = rng.choice(["place", "bare"])
    else:
        template = rng.choices(["place", "bare", "eat", "adj"], weights=[5, 2, 2, 2])[0]
        subject = rng.choice(PEOPLE if template == "eat" else SUBJECTS)
        activity = rng.choice([a for a in ACTIVITIES if (subject, a) not in HELD_OUT_PAIRS])
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
    return train, valid, test[:n_test] if n_test >= len(HELD_OUT_EXAMPLES) else test


def has_held_out_pair(sentence: str) -> bool:
    words = sentence.split()
    return any((s, a) in HELD_OUT_PAIRS for s, a in zip(words, words[2:]))
