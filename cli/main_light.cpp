// `veritrain`: the command line without LibTorch (torch_forward.h says which commands go on to
// `veritrain-torch`, and why).
#include "cli/app.h"
#include "cli/torch_forward.h"

int main(int argc, char** argv) {
  vt::cli::remember_arguments(argc, argv);
  if (vt::cli::needs_torch(argc, argv)) return vt::cli::exec_torch_program();
  return vt::cli::run(argc, argv, vt::cli::light_commands());
}
