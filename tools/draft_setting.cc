#include "draft_setting.h"

#include <cstdio>

namespace dsv4::cli {

int effective_draft(const Engine& engine, int requested, const std::string& command) {
  if (requested == 0 || engine.proposer) return requested;
  std::fprintf(stderr,
               "dsv4 %s: %s has no MTP module (no mtp.0.* tensors): speculative decoding is off, the target "
               "decodes alone (--draft %d ignored)\n",
               command.c_str(), engine.files->dir.string().c_str(), requested);
  return 0;
}

}  // namespace dsv4::cli
