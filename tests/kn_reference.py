"""An independent, loop-based modified Kneser-Ney, written from Chen & Goodman (1998).

Dicts and loops only: slow and obviously correct, to check the vectorized estimator.
Conventions as KenLM's: sentences are <s> w1 .. wL </s> with one <s>; n-grams starting
with <s> (and all highest-order n-grams) keep raw counts, others use the number of
distinct left extensions; the <s> unigram has adjusted count 0; the unigram level
interpolates with the uniform distribution over the vocabulary without <s>.
"""

from collections import Counter, defaultdict

BOS, EOS = "<s>", "</s>"


def modified_kn(sentences, vocab_words, order, fallback=(0.5, 1.0, 1.5)):
    """Return prob(word, context_tuple) for context tuples of up to order-1 words."""
    raw = [Counter() for _ in range(order + 1)]  # raw[k][ngram tuple]
    for sent in sentences:
        seq = [BOS, *sent, EOS]
        for k in range(1, order + 1):
            for i in range(len(seq) - k + 1):
                raw[k][tuple(seq[i : i + k])] += 1
    adjusted = [dict() for _ in range(order + 1)]
    for k in range(1, order + 1):
        for g, c in raw[k].items():
            if k == order or g[0] == BOS:
                adjusted[k][g] = c
            else:
                adjusted[k][g] = len({h[0] for h in raw[k + 1] if h[1:] == g})
        if k == 1:
            adjusted[1][(BOS,)] = 0
    discounts = {}
    for k in range(1, order + 1):
        n = Counter(a for a in adjusted[k].values() if a > 0)  # n[j]: exactly j
        if all(n[j] > 0 for j in (1, 2, 3)):
            y = n[1] / (n[1] + 2 * n[2])
            d = [j - (j + 1) * y * n[j + 1] / n[j] for j in (1, 2, 3)]
            ok = all(0 <= d[j - 1] <= j for j in (1, 2, 3))
        else:
            ok = False
        discounts[k] = d if ok else list(fallback)

    def D(k, a):
        return 0.0 if a == 0 else discounts[k][min(a, 3) - 1]

    by_context = [defaultdict(dict) for _ in range(order + 1)]
    for k in range(1, order + 1):
        for g, a in adjusted[k].items():
            by_context[k][g[:-1]][g[-1]] = a
    predictable = [w for w in vocab_words if w != BOS]

    def prob(word, context):
        if word == BOS:
            return 0.0
        p = 1.0 / len(predictable)
        for k in range(1, order + 1):
            h = tuple(context[len(context) - (k - 1) :]) if k > 1 else ()
            if k > 1 and len(h) < k - 1:
                break
            ext = by_context[k].get(h)
            if not ext:
                continue  # unseen context: keep the lower-order estimate
            total = sum(ext.values())
            gamma = sum(D(k, a) for a in ext.values()) / total
            a = ext.get(word, 0)
            p = max(a - D(k, a), 0.0) / total + gamma * p
        return p

    return prob, discounts
