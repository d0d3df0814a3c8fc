// GPT2Tokenizer::from_pretrained: a Hugging Face GPT-2 folder, read through vocab.json and
// merges.txt, or through tokenizer.json's BPE model where those two are missing.
#include <filesystem>

#include "brisk/data/bpe.h"
#include "brisk/util/error.h"
#include "brisk/util/json.h"
#include "read_file.h"

namespace brisk::data {

namespace {

namespace fs = std::filesystem;

// tokenizer.json's model as GPT-2's two files: the vocabulary as JSON, the merges one per line.
GPT2Tokenizer from_tokenizer_json(const std::string& path) {
  const std::string text = read_whole_file(path, "GPT2Tokenizer::from_pretrained");
  json::Value root;
  try {
    root = json::parse(text);
  } catch (const Error& e) {
    BRISK_THROW("GPT2Tokenizer::from_pretrained: '", path, "' is not valid JSON: ", e.message());
  }
  auto fail = [&](const std::string& what) { BRISK_THROW("GPT2Tokenizer::from_pretrained: '", path, "': ", what); };
  const json::Value* model = root.is_object() ? root.find("model") : nullptr;
  if (model == nullptr || !model->is_object()) fail("has no \"model\" object");
  const json::Value* type = model->find("type");
  const std::string t = type != nullptr && type->is_string() ? type->as_string() : "(none)";
  if (t != "BPE")
    fail("model.type " + t + " is not BPE" +
         (t == "WordPiece" ? " (BertTokenizer::from_pretrained reads WordPiece)" : ""));
  const json::Value* pre = root.find("pre_tokenizer");
  const json::Value* pre_type = pre != nullptr && pre->is_object() ? pre->find("type") : nullptr;
  if (pre_type == nullptr || !pre_type->is_string() || pre_type->as_string() != "ByteLevel")
    fail("pre_tokenizer is not ByteLevel: GPT2Tokenizer reads GPT-2's byte-level BPE only");
  const json::Value* vocab = model->find("vocab");
  const json::Value* merges = model->find("merges");
  if (vocab == nullptr || !vocab->is_object()) fail("model.vocab is not an object of token -> id");
  if (merges == nullptr || !merges->is_array()) fail("model.merges is not an array");
  std::string merges_txt;
  for (size_t i = 0; i < merges->size(); ++i) {
    const json::Value& m = (*merges)[i];
    if (m.is_string()) {
      merges_txt += m.as_string();
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges_txt += m[0].as_string() + " " + m[1].as_string();
    } else {
      fail("model.merges[" + std::to_string(i) + "] is neither \"a b\" nor [a, b]: " + m.dump());
    }
    merges_txt += '\n';
  }
  return GPT2Tokenizer::from_strings(vocab->dump(), merges_txt, path + " (model.vocab)", path + " (model.merges)");
}

}  // namespace

GPT2Tokenizer GPT2Tokenizer::from_pretrained(const std::string& dir) {
  std::error_code ec;
  BRISK_CHECK(fs::is_directory(dir, ec), "GPT2Tokenizer::from_pretrained: '", dir,
              "' is not a folder (a Hugging Face GPT-2 folder with vocab.json and merges.txt, or tokenizer.json; "
              "brisk downloads nothing)");
  const fs::path root(dir);
  const fs::path vocab = root / "vocab.json", merges = root / "merges.txt", tok = root / "tokenizer.json";
  if (fs::exists(vocab, ec) && fs::exists(merges, ec)) return from_files(vocab.string(), merges.string());
  if (fs::exists(tok, ec)) return from_tokenizer_json(tok.string());
  BRISK_THROW("GPT2Tokenizer::from_pretrained: '", dir, "' has ",
              fs::exists(vocab, ec)    ? "vocab.json but no merges.txt"
              : fs::exists(merges, ec) ? "merges.txt but no vocab.json"
                                       : "neither vocab.json + merges.txt nor tokenizer.json",
              fs::exists(root / "vocab.txt", ec)
                  ? " (its vocab.txt is a WordPiece vocabulary: BertTokenizer::from_pretrained reads it)"
                  : "");
}

}  // namespace brisk::data
