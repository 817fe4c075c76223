"""scripts/fetch-data's step: ALBERT's SentencePiece unigram model (data/albert-tokenizer/spiece.model)
written as a Unigram tokenizer.json the way transformers' AlbertConverter lays it out: its 30,000
pieces and scores, unk_id, the specials as added tokens, [CLS] text [SEP], Metaspace, and the
converter's normalizer: quotes, NFKD without accents, lowercase, the model's own precompiled
character map (SentencePiece's nmt_nfkc rules, base64) and runs of spaces as one.
Run by Debian's python3 (python3-sentencepiece):
  /usr/bin/python3 scripts/unigram-tokenizer-json.py SPIECE.model OUT/tokenizer.json"""
import base64
import json
import sys

import sentencepiece


def protobuf_field(message, wanted):
    """The bytes of length-delimited field `wanted` of a protobuf message (SentencePiece's ModelProto
    without the protobuf module, which Debian's python3-sentencepiece does not bring)."""
    at = 0
    def varint():
        nonlocal at
        value, shift = 0, 0
        while True:
            byte = message[at]; at += 1
            value |= (byte & 0x7F) << shift; shift += 7
            if byte < 0x80: return value
    while at < len(message):
        key = varint(); number, kind = key >> 3, key & 7
        if kind == 0: varint()
        elif kind == 1: at += 8
        elif kind == 5: at += 4
        elif kind == 2:
            size = varint()
            if number == wanted: return message[at:at + size]
            at += size
        else: raise ValueError(f"protobuf wire type {kind} is not SentencePiece's")
    return b""


model, out = sys.argv[1:3]
# ModelProto.normalizer_spec (3), NormalizerSpec.precompiled_charsmap (2)
charsmap = protobuf_field(protobuf_field(open(model, "rb").read(), 3), 2)
assert charsmap, "spiece.model has no precompiled character map"
sp = sentencepiece.SentencePieceProcessor(model_file=model)
vocab = [[sp.id_to_piece(i), sp.get_score(i)] for i in range(sp.get_piece_size())]
ids = {piece: i for i, (piece, _) in enumerate(vocab)}
specials = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
assert all(s in ids for s in specials), "spiece.model lacks ALBERT's special pieces"
metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
tokenizer = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": ids[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True} for s in specials],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "``"}, "content": "\""},
        {"type": "Replace", "pattern": {"String": "''"}, "content": "\""},
        {"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"},
        {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode("ascii")},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, metaspace]},
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                  {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                       "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                                {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                       "special_tokens": {s: {"id": s, "ids": [ids[s]], "tokens": [s]} for s in ["[CLS]", "[SEP]"]}},
    "decoder": metaspace,
    "model": {"type": "Unigram", "unk_id": sp.unk_id(), "vocab": vocab, "byte_fallback": False},
}
with open(out, "w", encoding="utf-8") as f:
    json.dump(tokenizer, f, ensure_ascii=False)
