"""Chat-prompt goldens: the token ids transformers' `apply_chat_template` gives for a folder's tokenizer, against
which Ringside's own rendering (src/format/chat-template.ts with @huggingface/jinja, src/format/tokenizer.ts) is
checked by test/unit/chat-template.test.ts.

For each prompt of PROMPTS the golden holds, per template:
  - "folder": the folder's own template (chat_template.jinja, else tokenizer_config.json's chat_template), as
    transformers' tokenizer from_pretrained(FOLDER) loads it;
  - "turns-thinking": TEMPLATE_TURNS_THINKING below, a Gemma 4-style template that differs from the folder's
    (it trims the text, maps roles, and closes an empty thought channel after the generation prompt), passed as
    `chat_template=`.
Each entry: the rendered text (tokenize=False) and the ids (tokenize=True), both with add_generation_prompt=True
and one user message, as mlx-lm and mlx-vlm build a chat prompt.

usage: /path/to/python tools/make_chat_golden.py [--folder public/demo/target] [--out test/fixtures/chat-template/demo-golden.json]
       [--label TEXT]
The synthetic checkpoints' goldens: `npm run cli -- synth --preset tiny --out DIR` (and --preset qwen-tiny), then
  --folder DIR/target --out test/fixtures/chat-template/synth-gemma4-golden.json --label "synth --preset tiny"
  (synth-qwen3_5-golden.json, "synth --preset qwen-tiny").
needs: transformers (>= 5), tokenizers, jinja2. Runs on the CPU in a second.
"""
import argparse, datetime, hashlib, json, os, subprocess

import jinja2
import tokenizers
import transformers
from transformers import PreTrainedTokenizerFast

PROMPTS = [
    "If the file",
    "  leading and trailing spaces  ",
    "two\nlines\n",
    "unicode: café ✓ 日本語",
    "special-looking text: <bos> and <|turn>user in the middle",
    "",
]

TEMPLATE_TURNS_THINKING = (
    "{{- bos_token -}}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {{- '<|turn>system\\n' + messages[0]['content'] | trim + '<turn|>\\n' -}}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if message['role'] not in ['user', 'assistant'] -%}\n"
    "        {{- raise_exception('roles are user and assistant, found ' + message['role']) -}}\n"
    "    {%- endif -%}\n"
    "    {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}\n"
    "    {{- '<|turn>' + role + '\\n' + message['content'] | trim + '<turn|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{- '<|turn>model\\n' -}}\n"
    "    {%- if not enable_thinking | default(false) -%}\n"
    "        {{- '<|channel>thought\\n<channel|>' -}}\n"
    "    {%- endif -%}\n"
    "{%- endif -%}\n"
)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", default="public/demo/target")
    ap.add_argument("--out", default="test/fixtures/chat-template/demo-golden.json")
    ap.add_argument("--label", help="what the folder is, for the golden (default: its path)")
    a = ap.parse_args()
    # The tokenizer files alone (AutoTokenizer would also parse config.json, which is not what is checked here).
    tok = PreTrainedTokenizerFast.from_pretrained(a.folder)
    templates = {"folder": None, "turns-thinking": TEMPLATE_TURNS_THINKING}
    cases = []
    for prompt in PROMPTS:
        messages = [{"role": "user", "content": prompt}]
        entry = {"prompt": prompt}
        for name, template in templates.items():
            kw = {"add_generation_prompt": True, "chat_template": template}
            text = tok.apply_chat_template(messages, tokenize=False, **kw)
            ids = tok.apply_chat_template(messages, tokenize=True, return_dict=False, **kw)
            entry[name] = {"text": text, "ids": list(ids)}
        cases.append(entry)
    files = {n: sha256(os.path.join(a.folder, n)) for n in sorted(os.listdir(a.folder)) if not n.endswith(".safetensors")}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    golden = {
        "made_by": "tools/make_chat_golden.py",
        "date": datetime.date.today().isoformat(),
        "commit": commit,
        "folder": a.label or a.folder,
        "folder_files_sha256": files,
        "versions": {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__, "jinja2": jinja2.__version__},
        "tokenizer_class": type(tok).__name__,
        "special_tokens": tok.special_tokens_map,
        "templates": {"turns-thinking": TEMPLATE_TURNS_THINKING},
        "cases": cases,
    }
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {a.out}: {len(cases)} prompts x {len(templates)} templates")


if __name__ == "__main__":
    main()
