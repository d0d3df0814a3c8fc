// `brisk merge-weights CHECKPOINT OUT.safetensors`: one safetensors file of a checkpoint's model
// (saved by any number of processes, sharded or not), the bytes save_model writes.
#include <cstdio>
#include <filesystem>
#include <string>

#include "brisk/accelerate/accelerator.h"
#include "brisk/util/cli.h"
#include "brisk/util/error.h"
#include "brisk/util/fs.h"
#include "commands.h"

namespace brisk::cli_commands {

int merge_weights(int argc, char** argv) {
  const std::string me = argv[0];
  int64_t model = 0;
  cli::Parser p(
      me,
      "Writes the model weights of a checkpoint folder (what Accelerator::save_state wrote, on any\n"
      "number of processes, with sharding none, zero1, zero2 or zero3) as one safetensors file: byte for byte\n"
      "what Accelerator::save_model writes for the same model (tied weights once, metadata\n"
      "{\"format\": \"pt\"}), ready for inference or for Hugging Face tools. Every file of the checkpoint is\n"
      "checked against its manifest first.\n\n"
      "  brisk merge-weights out/checkpoints/checkpoint_3 model.safetensors");
  p.add("model", "which prepared model, counting from 0 (model.safetensors, model_1.safetensors, ...)", &model);
  p.allow_positionals("CHECKPOINT_DIR OUT.safetensors");
  if (!p.parse(argc, argv)) return p.exit_code();
  if (p.positionals().size() != 2)
    return fail(me, "expected a checkpoint folder and an output file, got " + std::to_string(p.positionals().size()) +
                        " argument(s); usage: brisk merge-weights CHECKPOINT_DIR OUT.safetensors");
  if (model < 0) return fail(me, "--model must be 0 or more, got " + std::to_string(model));
  const std::string& dir = p.positionals()[0];
  const std::string& out = p.positionals()[1];
  try {
    const std::string bytes = accelerate::merged_model_weights(dir, static_cast<size_t>(model));
    const std::filesystem::path parent = std::filesystem::path(out).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    io::write_file_atomic(out, bytes, "merge-weights");
    std::printf("wrote %s (%zu bytes) from %s\n", out.c_str(), bytes.size(), dir.c_str());
  } catch (const Error& e) {
    return fail(me, e.message());
  } catch (const std::exception& e) {
    return fail(me, e.what());
  }
  return 0;
}

}  // namespace brisk::cli_commands
