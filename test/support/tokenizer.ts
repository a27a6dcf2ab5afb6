/**
 * A small Gemma-style tokenizer.json (BPE with byte fallback, spaces as U+2581, special tokens
 * <pad> 0, <eos> 1, <bos> 2, <|turn>, <turn|>) for tests: the fixtures ship none.
 */
export function tinyTokenizerJson(): object {
  const vocab: Record<string, number> = { '<pad>': 0, '<eos>': 1, '<bos>': 2 };
  let id = 3;
  for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = id++;
  for (const t of [
    '▁',
    'h',
    'e',
    'l',
    'o',
    '▁h',
    'he',
    'll',
    'ello',
    '▁hello',
    'w',
    'r',
    'd',
    '▁w',
    'or',
    'ld',
    '▁wor',
    '▁world',
    '<|turn>',
    '<turn|>',
    'u',
    's',
    'm',
    '\n',
  ])
    vocab[t] = id++;
  const special = (content: string) => ({
    id: vocab[content],
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: ['<pad>', '<eos>', '<bos>', '<|turn>', '<turn|>'].map(special),
    normalizer: { type: 'Replace', pattern: { String: ' ' }, content: '▁' },
    pre_tokenizer: null,
    post_processor: null,
    decoder: {
      type: 'Sequence',
      decoders: [
        { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
        { type: 'ByteFallback' },
        { type: 'Fuse' },
      ],
    },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: true,
      ignore_merges: false,
      vocab,
      merges: [
        ['▁', 'h'],
        ['h', 'e'],
        ['l', 'l'],
        ['e', 'll'],
        ['▁h', 'ello'],
        ['▁', 'w'],
        ['o', 'r'],
        ['l', 'd'],
        ['▁w', 'or'],
        ['▁wor', 'ld'],
      ],
    },
  };
}
