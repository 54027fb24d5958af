"""Estimating count-based models from encoded text: one registry of the methods and
their settings (:mod:`.methods`, with :class:`~.methods.NgramJob`), counting
(:mod:`.counts`, with :mod:`.run_merge` and :mod:`.workspace` when memory is bounded),
and the methods themselves: modified Kneser-Ney (:mod:`.kneser_ney`), deleted
interpolation (:mod:`.interpolated`), class n-grams (:mod:`.classes`), add-k
(:mod:`.addk`), Stupid Backoff (:mod:`.stupid`) and entropy pruning (:mod:`.prune`).
The KN discounts are ``kneser_ney.discounts_of_counts``."""
