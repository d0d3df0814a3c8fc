// text_classification: BERT fine-tuned on the fortunes task (the default mode, Hugging Face's
// run_glue) or pretrained as a masked language model (`text_classification pretrain`, run_mlm); the
// workflow of docs/pretrained.md.
//
//   text_classification pretrain --output_dir out/bert_mlm            # a small BERT learns the fortunes' English
//   text_classification --model_name_or_path out/bert_mlm             # ... then classifies quotes by file
//   brisk launch -n 2 --mixed_precision bf16 text_classification ...  # data-parallel, unchanged
#include <string>

#include "modes.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "pretrain") return pretrain_main(argc - 1, argv + 1);
  return finetune_main(argc, argv);
}
