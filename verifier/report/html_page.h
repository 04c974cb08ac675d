#pragma once
// The pieces veritrain's pages for people share: report.html (a verdict, html_report.h) and the
// auditor's evidence page (evidence_page.h). A page is one self-contained file: inline CSS and
// SVG, no script, font or image fetched from anywhere (its Content-Security-Policy forbids it),
// so it opens offline and cannot phone home. Everything a provider or a file could have put in
// a string goes through html_escape.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vt::verifier {

// &, <, >, " and ' as entities.
std::string html_escape(std::string_view text);

namespace html {

// <!DOCTYPE html> ... <body>, with the shared style. `title` is escaped.
std::string page_open(std::string_view title);
std::string page_close();

// A finite number with printf `format`; "n/a", "inf" or "-inf" otherwise.
std::string num(double v, const char* format = "%.4g");

// A table with a caption, header cells and rows of already-escaped HTML cells. A header that
// starts with '<' is left-aligned text; others are right-aligned numbers.
struct Table {
  std::string caption;               // escaped here
  std::vector<std::string> headers;  // escaped here; "<name" marks a text column
  std::vector<std::vector<std::string>> rows;
};
std::string table(const Table& t);

// A two-column table of names and values (both escaped here), for keys and facts.
std::string facts(std::string_view caption,
                  const std::vector<std::pair<std::string, std::string>>& rows);

// An SVG chart frame over epochs (or steps) 1..n on x with `y_label` on a rotated y axis.
// Plot coordinates come from x_of / the caller's own y mapping inside [top, top + plot_h].
struct Frame {
  static constexpr double kW = 1100, kH = 260, kLeft = 86, kRight = 20, kTop = 16, kBottom = 44;
  static constexpr double kPlotW = kW - kLeft - kRight, kPlotH = kH - kTop - kBottom;
  std::uint64_t n = 1;
  double x_of(std::uint64_t i) const {  // centre of band i, i = 1..n
    return kLeft + (static_cast<double>(i) - 0.5) / static_cast<double>(n) * kPlotW;
  }
  double band() const { return kPlotW / static_cast<double>(n); }
};
// <svg ...> with shaded bands at `shaded`, both axes, x tick labels and both axis titles.
std::string svg_open(const Frame& f, std::string_view aria_label, std::string_view x_label,
                     std::string_view y_label, const std::vector<std::uint64_t>& shaded = {});
std::string y_tick(double y, const std::string& label);  // a grid line and its label at plot y

// Tick values for a linear axis spanning [lo, hi]: about `count` round numbers inside it.
std::vector<double> nice_ticks(double lo, double hi, int count = 5);

// A bar of measured / limit with the limit marked; red when measured > limit.
std::string gauge(double measured, double limit);

}  // namespace html
}  // namespace vt::verifier
