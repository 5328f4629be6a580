// The dsv4 command line: one file per subcommand, each registering itself on the app.
// Each register function adds a subcommand whose callback runs the command and
// returns its exit code through `exit_code` (the library throws; main prints).
#pragma once
#include <CLI/CLI.hpp>

namespace dsv4::cli {

struct CommandResult {
  int exit_code = 0;
};

void register_inspect(CLI::App& app, CommandResult& result);
void register_make_checkpoint(CLI::App& app, CommandResult& result);
void register_score(CLI::App& app, CommandResult& result);
void register_generate(CLI::App& app, CommandResult& result);
void register_chat(CLI::App& app, CommandResult& result);
void register_bench(CLI::App& app, CommandResult& result);
void register_tokenize(CLI::App& app, CommandResult& result);  // tokenize + detokenize
void register_serve(CLI::App& app, CommandResult& result);

}  // namespace dsv4::cli
