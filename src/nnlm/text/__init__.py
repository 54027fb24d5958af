"""Text to ids, the first step of the data flow: reading files of any compression,
atomically writing them (:mod:`.fileio`, :mod:`.jsonfiles`), the vocabulary
(:mod:`.vocab`, with the special words of :mod:`.specials`), encoded streams
(:mod:`.stream`), corpora and their splits (:mod:`.corpus`), and the built-in toy world
(:mod:`.toyworld`)."""
