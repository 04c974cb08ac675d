#pragma once
// One of veritrain's pages in a real browser (Debian's `chromium`, headless): the console
// messages the page causes (a script error or a Content-Security-Policy violation shows up
// there) and whether it fits a 1280 px window. The pages carry no script, so the width is
// measured on a copy that adds one inline script and allows it; the page as written is loaded
// too, and must log nothing.

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt::testing {

struct BrowserView {
  std::string console;  // every "CONSOLE" line chromium logged for the page as written
  int scroll_width = -1;
  int inner_width = -1;
};

inline std::string chromium_command(const std::filesystem::path& profile, const std::string& action,
                                    const std::filesystem::path& page, int height = 1000) {
  return "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
         "--disable-background-networking --disable-component-update --disable-sync "
         "--user-data-dir=" +
         profile.string() + " --window-size=1280," + std::to_string(height) +
         " --enable-logging=stderr --v=0 " + action + " file://" + page.string();
}

inline std::string console_lines(const std::string& err) {
  std::istringstream in(err);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.find(":CONSOLE") != std::string::npos) out += line + "\n";
  }
  return out;
}

// Loads `page` (and a measuring copy of it in `scratch`); fails the test on a chromium error.
inline BrowserView view_in_chromium(const std::filesystem::path& page,
                                    const std::filesystem::path& scratch) {
  BrowserView v;
  CommandResult plain =
      run_command(chromium_command(scratch / "profile", "--dump-dom", page), scratch);
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  v.console = console_lines(plain.err);
  Result<std::string> text = read_text_file(page);
  EXPECT_TRUE(text.ok());
  if (!text.ok()) return v;
  std::string copy = *text;
  const std::string csp = "style-src 'unsafe-inline'";
  const std::size_t at = copy.find(csp);
  EXPECT_NE(at, std::string::npos) << "the page has no Content-Security-Policy";
  if (at == std::string::npos) return v;
  copy.insert(at + csp.size(), "; script-src 'unsafe-inline'");
  const std::size_t body_end = copy.rfind("</body>");
  EXPECT_NE(body_end, std::string::npos);
  copy.insert(body_end,
              "<script>document.body.setAttribute('data-vt-width', "
              "document.documentElement.scrollWidth + ' ' + "
              "window.innerWidth)</script>");
  const std::filesystem::path measured = scratch / ("measured-" + page.filename().string());
  EXPECT_TRUE(write_file_atomic(measured, copy).ok());
  CommandResult dom =
      run_command(chromium_command(scratch / "profile", "--dump-dom", measured), scratch);
  EXPECT_EQ(dom.exit_code, 0) << dom.err;
  std::smatch m;
  if (std::regex_search(dom.out, m, std::regex("data-vt-width=\"([0-9]+) ([0-9]+)\""))) {
    v.scroll_width = std::stoi(m[1]);
    v.inner_width = std::stoi(m[2]);
  }
  return v;
}

// A PNG of the page's first `height` CSS pixels laid out 1280 px wide, drawn at `scale` (0.625:
// an 800 px wide image, small enough for docs/).
inline bool screenshot(const std::filesystem::path& page, const std::filesystem::path& png,
                       const std::filesystem::path& scratch, int height, double scale = 1.0) {
  const std::string action =
      "--force-device-scale-factor=" + std::to_string(scale) + " --screenshot=" + png.string();
  CommandResult r =
      run_command(chromium_command(scratch / "profile", action, page, height), scratch);
  return r.exit_code == 0 && std::filesystem::exists(png);
}

}  // namespace vt::testing
