// dsv4 inspect DIR [--json]: summary of a checkpoint; exit 0 only when it is complete.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/inspect.h"
#include "core/error.h"
#include "commands.h"

namespace dsv4::cli {

namespace {
struct InspectArgs {
  std::string dir;
  bool json = false;
};

// One line for stderr naming the first problems, so that a failing script says why.
std::string problem_summary(const InspectReport& r) {
  if (!r.opened()) return r.error;
  std::string s = cat(r.path, ": incomplete or inconsistent checkpoint:");
  if (!r.inconsistent.empty()) s += " " + r.inconsistent;
  if (!r.missing.empty()) s += cat(" ", r.missing.size(), " missing (first: ", r.missing.front(), ")");
  if (!r.unexpected.empty()) s += cat(" ", r.unexpected.size(), " unexpected (first: ", r.unexpected.front(), ")");
  if (!r.mismatched.empty())
    s += cat(" ", r.mismatched.size(), " mismatched (first: ", r.mismatched.front().name, ": ",
             r.mismatched.front().detail, ")");
  return s;
}
}  // namespace

void register_inspect(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd = app.add_subcommand(
      "inspect",
      "Summarize a checkpoint directory (dtypes, layer kinds, hash layers, the MTP module or DSpark drafter, naming "
      "family, the encoding of each module group and the bytes a decode step reads per token under it) and list "
      "every missing, unexpected, mis-shaped or mis-typed tensor. Reads headers only. Exit 0: complete; 1: incomplete or "
      "inconsistent; 2: cannot be opened.");
  cmd->add_option("dir", args->dir, "checkpoint directory (config.json + safetensors shards)")->required();
  cmd->add_flag("--json", args->json, "print one JSON object instead of text");
  cmd->callback([args, &result] {
    const InspectReport report = inspect_checkpoint(args->dir);
    if (args->json) std::printf("%s\n", report_to_json(report).dump(2).c_str());
    else std::fputs(format_report(report).c_str(), stdout);
    std::fflush(stdout);
    if (!report.complete()) std::fprintf(stderr, "dsv4 inspect: %s\n", problem_summary(report).c_str());
    result.exit_code = report.complete() ? 0 : report.opened() ? 1 : 2;
  });
}

}  // namespace dsv4::cli
