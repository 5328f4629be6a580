// Placeholders for subcommands under construction (weak: a real definition replaces them).
#include "commands.h"

namespace dsv4::cli {
namespace {
void stub(CLI::App& app, const char* name, CommandResult& result) {
  auto* cmd = app.add_subcommand(name, "(not available yet)");
  cmd->allow_extras();
  cmd->callback([&result, name] {
    std::fprintf(stderr, "dsv4 %s: not available yet\n", name);
    result.exit_code = 2;
  });
}
}  // namespace
__attribute__((weak)) void register_inspect(CLI::App& a, CommandResult& r) { stub(a, "inspect", r); }
__attribute__((weak)) void register_make_checkpoint(CLI::App& a, CommandResult& r) { stub(a, "make-checkpoint", r); }
__attribute__((weak)) void register_score(CLI::App& a, CommandResult& r) { stub(a, "score", r); }
__attribute__((weak)) void register_generate(CLI::App& a, CommandResult& r) { stub(a, "generate", r); }
__attribute__((weak)) void register_chat(CLI::App& a, CommandResult& r) { stub(a, "chat", r); }
__attribute__((weak)) void register_bench(CLI::App& a, CommandResult& r) { stub(a, "bench", r); }
__attribute__((weak)) void register_tokenize(CLI::App& a, CommandResult& r) {
  stub(a, "tokenize", r);
  stub(a, "detokenize", r);
}
}  // namespace dsv4::cli
