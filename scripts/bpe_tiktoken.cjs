// Golden encodings of GPT-2's own vocabulary from a second independent implementation: OpenAI's
// tiktoken (its Rust core, as WebAssembly, from npm's `tiktoken` package) with the "gpt2"
// encoding and allowed_special "all". It encodes every test string of
// tests/data/fixtures/gpt2/goldens.json (written by scripts/bpe_reference.py) that is valid UTF-8
// (tiktoken takes text, not bytes) and writes tests/data/fixtures/gpt2/goldens_tiktoken.json.
//
//   npm install --prefix /tmp/tiktoken tiktoken@1.0.22
//   NODE_PATH=/tmp/tiktoken/node_modules node scripts/bpe_tiktoken.cjs
const fs = require("fs");
const path = require("path");
const { get_encoding } = require("tiktoken");

const dir = path.join(__dirname, "..", "tests", "data", "fixtures", "gpt2");
const reference = JSON.parse(fs.readFileSync(path.join(dir, "goldens.json"), "utf8"));
const enc = get_encoding("gpt2");
const decoder = new TextDecoder("utf-8", { fatal: true });
const strings = [];
let differ = 0;
for (const g of reference.strings) {
  const bytes = Buffer.from(g.hex, "hex");
  let text;
  try {
    text = decoder.decode(bytes);
  } catch (e) {
    continue;  // not UTF-8
  }
  const ids = Array.from(enc.encode(text, "all"));
  if (JSON.stringify(ids) !== JSON.stringify(g.ids)) {
    differ++;
    console.error(`differs from scripts/bpe_reference.py: ${g.name}`);
  }
  strings.push({ name: g.name, hex: g.hex, ids: ids });
}
enc.free();
fs.writeFileSync(path.join(dir, "goldens_tiktoken.json"),
                 JSON.stringify({ generator: "tiktoken 1.0.22 (npm), encoding gpt2, allowed_special all",
                                  vocab_size: 50257, merges: 50000, strings: strings }, null, 1) + "\n");
console.log(`tiktoken: ${strings.length} strings, ${differ} differ from the Python reference`);
process.exit(differ ? 1 : 0);
