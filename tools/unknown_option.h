// A misspelled option or command, answered with the ones meant: "--drafts" → "--draft".
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace dsv4::cli {

// The message for arguments the parser did not expect (null: not a misspelling this can help
// with — CLI11's own message then stands).
std::string unknown_arguments_message(CLI::App& app, int argc, char** argv);

}  // namespace dsv4::cli
