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
  // Words (runs of two or more letters outside <code>, <pre> and charts) that the layout broke
  // across lines: a table column squeezed narrower than a word shows up here.
  std::string broken_words;
};

inline std::string chromium_command(const std::filesystem::path& profile, const std::string& action,
                                    const std::filesystem::path& page, int height = 1000,
                                    int width = 1280) {
  return "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
         "--disable-background-networking --disable-component-update --disable-sync "
         "--user-data-dir=" +
         profile.string() + " --window-size=" + std::to_string(width) + "," +
         std::to_string(height) + " --enable-logging=stderr --v=0 " + action + " file://" +
         page.string();
}

inline std::string console_lines(const std::string& err) {
  std::istringstream in(err);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.find(":CONSOLE") != std::string::npos) out += line + "\n";
  }
  return out;
}

// Run in the measuring copy. Widths: the layout width (the window's; headless Chromium's is at
// least 500 px wide, so a narrower one is posed by a style "vt-pose" giving the root that width)
// and how far right any content reaches, not counting what scrolls inside its own box. Words:
// in every whitespace-separated token of letters (hyphens and apostrophes inside, punctuation
// around) outside <pre> and charts, each part between hyphens (a line may end after a
// hyphen) that is laid out on more than one line (a Range over it has client rectangles at more
// than one height). Paths and hex are no words; they may break.
inline constexpr const char* kMeasureScript =
    "<script>(function(){var b=document.body,d=document.documentElement;"
    "var W=document.getElementById('vt-pose')?Math.round(d.getBoundingClientRect().width)"
    ":window.innerWidth;"
    "function right(e){var r=e.getBoundingClientRect().right;"
    "if(getComputedStyle(e).overflowX!='visible')return r;"
    "for(var c=e.firstElementChild;c;c=c.nextElementSibling)r=Math.max(r,right(c));return r;}"
    "var R=Math.ceil(right(b));if(W==window.innerWidth)R=Math.max(R,d.scrollWidth);"
    "b.setAttribute('data-vt-width',R+' '+W);"
    "var broken=[],w=document.createTreeWalker(b,NodeFilter.SHOW_TEXT),n;"
    "var word=/^[(\"']?([A-Za-z]+(['-][A-Za-z]+)*)[)\"',.;:!?]*$/;"
    "while((n=w.nextNode())){var p=n.parentElement;"
    "if(!p||p.closest('pre,svg,script,title,style'))continue;"
    "var re=/\\S+/g,m;while((m=re.exec(n.textContent))){if(!word.test(m[0]))continue;"
    "var pr=/[A-Za-z']+/g,q;while((q=pr.exec(m[0]))){var at=m.index+q.index;"
    "var r=document.createRange();r.setStart(n,at);r.setEnd(n,at+q[0].length);"
    "var tops={},k=0,rs=r.getClientRects();for(var i=0;i<rs.length;i++){"
    "if(rs[i].width>0&&!tops[Math.round(rs[i].top)]){tops[Math.round(rs[i].top)]=1;k++;}}"
    "if(k>1&&broken.length<20)broken.push(q[0]);}}}"
    "b.setAttribute('data-vt-broken',broken.join(' '));})()</script>";

// Headless Chromium's narrowest window.
inline constexpr int kNarrowestWindow = 500;

// The console lines of `page` as written, loaded in a window `width` CSS pixels wide; fails the
// test on a chromium error.
inline std::string console_in_chromium(const std::filesystem::path& page,
                                       const std::filesystem::path& scratch, int width = 1280) {
  CommandResult plain =
      run_command(chromium_command(scratch / "profile", "--dump-dom", page, 1000, width), scratch);
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  return console_lines(plain.err);
}

// Lays out a measuring copy of `page` (in `scratch`) in a window `width` CSS pixels wide: the
// view's widths and broken words, not its console (console_in_chromium: the page does not log
// more at one width than at another, and each load starts a browser).
inline BrowserView measured_in_chromium(const std::filesystem::path& page,
                                        const std::filesystem::path& scratch, int width = 1280) {
  BrowserView v;
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
  copy.insert(body_end, kMeasureScript);
  if (width < kNarrowestWindow) {
    const std::size_t head_end = copy.find("</head>");
    EXPECT_NE(head_end, std::string::npos);
    if (head_end != std::string::npos)
      copy.insert(head_end,
                  "<style id=\"vt-pose\">html{width:" + std::to_string(width) + "px}</style>");
  }
  const std::filesystem::path measured = scratch / ("measured-" + page.filename().string());
  EXPECT_TRUE(write_file_atomic(measured, copy).ok());
  CommandResult dom = run_command(
      chromium_command(scratch / "profile", "--dump-dom", measured, 1000, width), scratch);
  EXPECT_EQ(dom.exit_code, 0) << dom.err;
  std::smatch m;
  if (std::regex_search(dom.out, m, std::regex("data-vt-width=\"([0-9]+) ([0-9]+)\""))) {
    v.scroll_width = std::stoi(m[1]);
    v.inner_width = std::stoi(m[2]);
  }
  if (std::regex_search(dom.out, m, std::regex("data-vt-broken=\"([^\"]*)\"")))
    v.broken_words = m[1];
  return v;
}

// Loads `page` as written and a measuring copy of it, in a window `width` CSS pixels wide.
inline BrowserView view_in_chromium(const std::filesystem::path& page,
                                    const std::filesystem::path& scratch, int width = 1280) {
  BrowserView v = measured_in_chromium(page, scratch, width);
  v.console = console_in_chromium(page, scratch, width);
  return v;
}

// A PNG of the page's first `height` CSS pixels laid out 1280 px wide, drawn at `scale` (0.625:
// an 800 px wide image, small enough for docs/).
inline bool screenshot(const std::filesystem::path& page, const std::filesystem::path& png,
                       const std::filesystem::path& scratch, int height, double scale = 1.0,
                       int width = 1280) {
  const std::string action =
      "--force-device-scale-factor=" + std::to_string(scale) + " --screenshot=" + png.string();
  CommandResult r =
      run_command(chromium_command(scratch / "profile", action, page, height, width), scratch);
  return r.exit_code == 0 && std::filesystem::exists(png);
}

}  // namespace vt::testing
