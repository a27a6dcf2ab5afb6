// Rooms of a readable size: no source file in src/ over 600 lines and no function over 150 (its whole text,
// nested functions included), so that a module and a function can be read in one sitting. Run by `npm run lint`
// and `npm test`; exits 1 listing each file or function over its bound.
import ts from 'typescript';
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

const MAX_FILE_LINES = 600;
const MAX_FUNCTION_LINES = 150;

const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', 'src'], {
  encoding: 'utf8',
})
  .split('\n')
  .filter((f) => f.endsWith('.ts'));
const over = [];
let functions = 0;
for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  if (lines > MAX_FILE_LINES) over.push(`${file}: ${lines} lines (at most ${MAX_FILE_LINES})`);
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const line = (pos) => sf.getLineAndCharacterOfPosition(pos).line;
  const visit = (node) => {
    const isFunction =
      ts.isFunctionDeclaration(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isArrowFunction(node) ||
      ts.isFunctionExpression(node) ||
      ts.isConstructorDeclaration(node) ||
      ts.isGetAccessorDeclaration(node) ||
      ts.isSetAccessorDeclaration(node);
    if (isFunction && node.body) {
      functions++;
      const n = line(node.end) - line(node.getStart()) + 1;
      const name = node.name ? node.name.getText(sf) : '(anonymous)';
      if (n > MAX_FUNCTION_LINES)
        over.push(`${file}:${line(node.getStart()) + 1} ${name}: ${n} lines (at most ${MAX_FUNCTION_LINES})`);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
}
if (over.length) {
  console.error(`sizes: ${over.length} over their bound:\n  ${over.join('\n  ')}`);
  process.exit(1);
}
console.log(
  `sizes: ${files.length} files of src/ within ${MAX_FILE_LINES} lines, ${functions} functions within ${MAX_FUNCTION_LINES}`,
);
