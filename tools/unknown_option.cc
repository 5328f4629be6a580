#include "unknown_option.h"

#include <algorithm>
#include <vector>

namespace dsv4::cli {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The closest of `names` to `word` if close enough to be a slip (a third of its letters at most).
std::string closest(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& n : names) {
    const size_t d = edit_distance(word, n);
    if (d < best_d) best_d = d, best = n;
  }
  return best;
}

}  // namespace

std::string unknown_arguments_message(CLI::App& app, int argc, char** argv) {
  std::vector<CLI::App*> parsed = app.get_subcommands();
  if (parsed.empty()) {  // no command: a misspelled one?
    if (argc < 2 || argv[1][0] == '-') return "";
    std::vector<std::string> commands;
    for (const CLI::App* c : app.get_subcommands({})) commands.push_back(c->get_name());
    const std::string near = closest(argv[1], commands);
    return near.empty() ? "" : "dsv4: unknown command '" + std::string(argv[1]) + "'; did you mean '" + near + "'?";
  }
  CLI::App* cmd = parsed.front();
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd->get_options())
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  std::string message;
  for (const std::string& extra : cmd->remaining()) {
    if (extra.rfind("--", 0) != 0) continue;
    const std::string word = extra.substr(0, extra.find('='));
    const std::string near = closest(word, names);
    message += (message.empty() ? "" : "\n") + ("dsv4 " + cmd->get_name() + ": unknown option " + word) +
               (near.empty() ? "" : "; did you mean " + near + "?");
  }
  if (!message.empty()) message += "\n(dsv4 " + cmd->get_name() + " --help lists every option)";
  return message;
}

}  // namespace dsv4::cli
