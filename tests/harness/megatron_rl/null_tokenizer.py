"""``NullTokenizer`` (ids as space-separated text) with the two ids the RL loop asks for.

Megatron-RL reads ``tokenizer.bos`` (``MegatronLocal.launch``, ``prepare_trajectories``) and the
chat front end ``tokenizer.eos_id``; the wrapper answers them from the library tokenizer's
``bos_id`` / ``eos_id``, which megatron-core's ``NullTokenizer`` does not define (an
AttributeError). :func:`install` gives it ``bos_id = None`` (no BOS: the RL code then neither adds
nor expects one, and says so) and ``eos_id`` = its end-of-document id. The pad id comes from
``--null-tokenizer-pad-id`` (a real row of the embedding: the RL loop pads trajectories with it).
"""


def install():
    from megatron.core.tokenizers.text.libraries.null_tokenizer import NullTokenizer

    if not hasattr(NullTokenizer, "bos_id"):
        NullTokenizer.bos_id = property(lambda self: None)
    if not hasattr(NullTokenizer, "eos_id"):
        NullTokenizer.eos_id = property(lambda self: self.eod)
