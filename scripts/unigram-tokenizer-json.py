"""scripts/fetch-data's step: ALBERT's SentencePiece unigram model (data/albert-tokenizer/spiece.model)
written as a Unigram tokenizer.json the way transformers' AlbertConverter lays it out: its 30,000
pieces and scores, unk_id, the specials as added tokens, [CLS] text [SEP], Metaspace. The normalizer
is the converter's without its two steps the pipeline does not read yet (SentencePiece's Precompiled
character map and a Replace by regex of runs of spaces).
Run by Debian's python3 (python3-sentencepiece):
  /usr/bin/python3 scripts/unigram-tokenizer-json.py SPIECE.model OUT/tokenizer.json"""
import json
import sys

import sentencepiece

model, out = sys.argv[1:3]
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
        {"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
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
