"""Synthetic CTC outputs for the decoder clients (tests/pyctcdecode_client.py and the
README's recipes): per character of a line, 2-3 frames peaked on it (blanks between
repeats), over a seeded noise floor, so that every run decodes the same matrices."""

import numpy as np

LABELS = ["", " ", "'"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
INDEX = {c: i for i, c in enumerate(LABELS)}


def logits_for(line: str, rng) -> np.ndarray:
    frames = []
    previous = None
    for ch in line:
        if ch not in INDEX:
            continue
        if ch == previous:
            frames.append(0)  # a blank between repeated characters
        frames += [INDEX[ch]] * int(rng.integers(2, 4))
        previous = ch
    probs = rng.uniform(0, 0.3, size=(len(frames), len(LABELS)))
    for t, k in enumerate(frames):
        probs[t, k] += rng.uniform(0.6, 1.5)
        probs[t, int(rng.integers(len(LABELS)))] += rng.uniform(0, 0.6)  # confusions
    probs /= probs.sum(axis=1, keepdims=True)
    return np.log(probs).astype(np.float32)
