// dsv4: inspect, score, generate, chat, serve, bench and make DeepSeek-V4 checkpoints.
#include <cstdio>
#include <exception>

#include "commands.h"
#include "unknown_option.h"

int main(int argc, char** argv) {
  CLI::App app{"dsv4: DeepSeek-V4 inference with MTP speculative decoding"};
  app.require_subcommand(1);
  dsv4::cli::CommandResult result;
  dsv4::cli::register_inspect(app, result);
  dsv4::cli::register_make_checkpoint(app, result);
  dsv4::cli::register_score(app, result);
  dsv4::cli::register_generate(app, result);
  dsv4::cli::register_chat(app, result);
  dsv4::cli::register_bench(app, result);
  dsv4::cli::register_tokenize(app, result);
  dsv4::cli::register_serve(app, result);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (dynamic_cast<const CLI::ExtrasError*>(&e) || dynamic_cast<const CLI::RequiredError*>(&e)) {
      const std::string message = dsv4::cli::unknown_arguments_message(app, argc, argv);
      if (!message.empty()) {
        std::fprintf(stderr, "%s\n", message.c_str());
        return e.get_exit_code();
      }
    }
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv4: error: %s\n", e.what());
    return 1;
  }
  return result.exit_code;
}
