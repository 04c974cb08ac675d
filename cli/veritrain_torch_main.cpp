// `veritrain-torch`: every command, LibTorch linked. `veritrain` (veritrain_main.cpp) runs the
// commands that need no LibTorch itself and hands the others to this program.
#include "cli/app.h"

int main(int argc, char** argv) { return vt::cli::run(argc, argv, vt::cli::full_commands()); }
