"""SHA-256 of short texts (fingerprints), without loading OpenSSL.

hashlib's sha256 comes from OpenSSL, whose library adds about 3.5 MB to every process
that imports it (``python -c "import numpy; import hashlib"`` against numpy alone).
Opening a model hashes only short texts (the vocabulary's and the arrays' fingerprints),
so nnlm takes CPython's own SHA-256, the one hashlib itself falls back to without
OpenSSL (``_sha2`` from Python 3.12, ``_sha256`` before): same digests, and a server or
pool worker that maps an n-gram model stays that much smaller. Hashing whole files
(:func:`nnlm.model_files.model_identity`) still uses hashlib.
"""

from __future__ import annotations


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data``, in hex."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found]  # Python >= 3.12
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found,no-redef]
        except ImportError:  # pragma: no cover - a build without CPython's own
            from hashlib import sha256  # type: ignore[no-redef]
    return sha256(data).hexdigest()
