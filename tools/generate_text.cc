#include "generate_text.h"

#include "core/error.h"

namespace dsv4::cli {

int generate_text(Engine& engine, const std::string& prompt, const GenerateOptions& options, bool json) {
  (void)engine; (void)prompt; (void)options; (void)json;
  throw Error("--prompt: text prompts are not available yet; use --prompt-tokens");
}

}  // namespace dsv4::cli
