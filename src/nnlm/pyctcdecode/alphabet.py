"""pyctcdecode.alphabet: the labels of a CTC model as the decoder reads them."""

# absolute imports: this module is also imported as pyctcdecode's (sys.modules
# ["pyctcdecode"] = nnlm.pyctcdecode), where a relative one would leave the package

from nnlm.decoding.ctc.alphabet import (  # noqa: F401 - the module's names, as pyctcdecode's
    BLANK_TOKEN_PTN,
    BPE_TOKEN,
    SPECIAL_TOKEN_PTN,
    UNK_BPE_TOKEN,
    UNK_TOKEN,
    UNK_TOKEN_PTN,
    Alphabet,
    verify_alphabet_coverage,
)
from nnlm.decoding.ctc.alphabet import check_if_bpe as _check_if_bpe  # noqa: F401
from nnlm.decoding.ctc.alphabet import convert_bpe_token_style as _convert_bpe_token_style  # noqa: F401, E501
from nnlm.decoding.ctc.alphabet import normalize_bpe_alphabet as _normalize_bpe_alphabet  # noqa: F401
from nnlm.decoding.ctc.alphabet import (  # noqa: F401
    normalize_regular_alphabet as _normalize_regular_alphabet,
)
from nnlm.decoding.ctc.alphabet import verify_alphabet as _verify_alphabet  # noqa: F401
