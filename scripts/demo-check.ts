/**
 * Checks a demo-model export with the app's own loaders (tools/demo/train_demo.py writes it):
 *   node --import tsx scripts/demo-check.ts DIR
 * DIR holds tokenizer.json (or tokenizer/tokenizer.json), tokenizer-expect.json (text -> ids from the Python side:
 * the `tokenizers` library in a real run, train_demo.py's reference BPE under --selftest) and variant folders
 * {q4,q8}/{target,assistant}. It encodes every expected text with @huggingface/tokenizers (as the page does) and
 * requires the same ids and an exact round trip, then opens each checkpoint folder as the page would (config
 * validation, tensor plan, quantization) and prints what it found. Exit status 1 on any mismatch.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { loadTokenizer } from '../src/format/tokenizer.ts';
import { nodeFileSource, openCheckpointDir } from '../src/node/file-source.ts';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node --import tsx scripts/demo-check.ts DIR');
  process.exit(2);
}
const pick = (...names: string[]) => names.map((n) => path.join(dir, n)).find((p) => existsSync(p));
let failures = 0;
const fail = (msg: string) => {
  failures++;
  console.error(`FAIL ${msg}`);
};

const tokPath = pick('tokenizer.json', 'tokenizer/tokenizer.json');
const expectPath = pick('tokenizer-expect.json', 'tokenizer/tokenizer-expect.json');
if (!tokPath) fail('no tokenizer.json');
else {
  const tok = await loadTokenizer(await nodeFileSource(tokPath));
  const expected: Record<string, number[]> = expectPath ? JSON.parse(readFileSync(expectPath, 'utf8')) : {};
  let n = 0;
  for (const [text, ids] of Object.entries(expected)) {
    const got = tok.encode(text, false);
    if (JSON.stringify(got) !== JSON.stringify(ids))
      fail(
        `encode ${JSON.stringify(text.slice(0, 40))}: app ${JSON.stringify(got.slice(0, 12))}… python ${JSON.stringify(ids.slice(0, 12))}…`,
      );
    const back = tok.decode(got);
    if (back !== text) fail(`round trip ${JSON.stringify(text.slice(0, 40))} -> ${JSON.stringify(back.slice(0, 40))}`);
    n++;
  }
  const chat = tok.encode('Tell me a fortune.', true);
  if (chat[0] !== 2 || chat[1] !== 105 || !chat.includes(106)) fail(`chat template ids ${JSON.stringify(chat)}`);
  console.log(
    `tokenizer ${path.relative(dir, tokPath)}: ${n} texts encode as the Python side does and round-trip; chat ${JSON.stringify(chat.slice(0, 8))}…`,
  );
}

for (const variant of ['q4', 'q8']) {
  for (const role of ['target', 'assistant']) {
    const folder = path.join(dir, variant, role);
    if (!existsSync(folder)) continue;
    try {
      const ck = await openCheckpointDir(folder, `${variant}/${role}`);
      const d = ck.description as unknown as Record<string, unknown>;
      const layers = (d.layers as { type: string }[] | undefined)?.map((l) => l.type[0]).join('') ?? '?';
      console.log(
        `${variant}/${role}: ${ck.modelType}, ${(ck.totalBytes / 1e6).toFixed(2)} MB, vocab ${d.vocab}, hidden ${d.hidden}, window ${d.window}, layers ${layers}, eos ${JSON.stringify(d.eosIds)}${ck.tokenizer ? ', tokenizer.json' : ''}`,
      );
      if (role === 'target' && !ck.tokenizer) fail(`${variant}/target has no tokenizer.json`);
    } catch (e) {
      fail(`${variant}/${role}: ${(e as Error).message}`);
    }
  }
}
if (failures) {
  console.error(`${failures} failure(s)`);
  process.exit(1);
}
console.log('demo-check ok');
