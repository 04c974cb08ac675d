// `veritrain`: the command line without LibTorch (torch_forward.h says which commands go on to
// `veritrain-torch`, and why).
#include <cstdio>

#include "cli/app.h"
#include "cli/torch_forward.h"

int main(int argc, char** argv) {
  vt::cli::remember_arguments(argc, argv);
  if (const vt::cli::StoredHelp* help = vt::cli::stored_help(argc, argv)) {
    std::fwrite(help->text.data(), 1, help->text.size(), stdout);
    return 0;
  }
  if (vt::cli::needs_torch(argc, argv)) return vt::cli::exec_torch_program();
  return vt::cli::run(argc, argv, vt::cli::light_commands());
}
