#include "verifier/report/html_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace vt::verifier {

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

namespace html {
namespace {

// Fits any window from a phone's 390 px to 1280 px: the body is capped; words wrap between
// words only (overflow-wrap:anywhere would let a table squeeze a column to one letter per line);
// hex in <code> breaks where it must, a word in it only when it is longer than the line; a table
// wider than the window scrolls inside its own box, never the page.
constexpr std::string_view kStyle = R"(
body{font-family:sans-serif;margin:20px auto;padding:0 16px;color:#222;max-width:1150px;line-height:1.4;overflow-wrap:break-word}
h1{font-size:22px;margin-bottom:6px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}
p.lead{font-size:16px;margin:8px 0 4px}
.accepted{color:#1a7f37}.rejected{color:#c62828}.inconclusive{color:#b26a00}.muted{color:#666}
div.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
caption{text-align:left;font-weight:bold;padding:4px 0;font-size:14px}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#f2f2f2}td.l,th.l{text-align:left}
code{font-size:12px;overflow-wrap:anywhere}
pre{background:#f6f6f6;border:1px solid #ddd;padding:8px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:13px}
svg.chart{width:100%;height:auto;background:#fff}.legend span{margin-right:18px;font-size:13px}
.sw{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
)";

}  // namespace

std::string page_open(std::string_view title) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
         "'unsafe-inline'\">"
         "<title>" +
         html_escape(title) + "</title><style>" + std::string(kStyle) + "</style></head><body>\n";
}

std::string page_close() { return "</body></html>\n"; }

std::string num(double v, const char* format) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string table(const Table& t) {
  std::string s = "<div class=\"scroll\"><table>";
  if (!t.caption.empty()) s += "<caption>" + html_escape(t.caption) + "</caption>";
  s += "<thead><tr>";
  std::vector<bool> text(t.headers.size());
  for (std::size_t i = 0; i < t.headers.size(); ++i) {
    std::string_view h = t.headers[i];
    text[i] = h.starts_with('<');
    if (text[i]) h.remove_prefix(1);
    s += std::string(text[i] ? "<th class=\"l\">" : "<th>") + html_escape(h) + "</th>";
  }
  s += "</tr></thead><tbody>\n";
  for (const auto& row : t.rows) {
    s += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) {
      s += std::string(i < text.size() && text[i] ? "<td class=\"l\">" : "<td>") + row[i] + "</td>";
    }
    s += "</tr>\n";
  }
  return s + "</tbody></table></div>\n";
}

std::string facts(std::string_view caption,
                  const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string s = "<div class=\"scroll\"><table>";
  if (!caption.empty()) s += "<caption>" + html_escape(caption) + "</caption>";
  for (const auto& [k, v] : rows) {
    s += "<tr><th class=\"l\">" + html_escape(k) + "</th><td class=\"l\"><code>" + html_escape(v) +
         "</code></td></tr>\n";
  }
  return s + "</table></div>\n";
}

std::string svg_open(const Frame& f, std::string_view aria_label, std::string_view x_label,
                     std::string_view y_label, const std::vector<std::uint64_t>& shaded) {
  using F = Frame;
  std::string s = "<svg class=\"chart\" viewBox=\"0 0 " + num(F::kW, "%.0f") + " " +
                  num(F::kH, "%.0f") + "\" role=\"img\" aria-label=\"" + html_escape(aria_label) +
                  "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
  for (std::uint64_t e : shaded) {
    s += "<rect x=\"" + num(f.x_of(e) - f.band() / 2, "%.2f") + "\" y=\"" + num(F::kTop, "%.0f") +
         "\" width=\"" + num(f.band(), "%.2f") + "\" height=\"" + num(F::kPlotH, "%.0f") +
         "\" fill=\"#dbe9ff\"/>\n";
  }
  const double y0 = F::kTop + F::kPlotH;
  s += "<line x1=\"" + num(F::kLeft, "%.0f") + "\" y1=\"" + num(y0, "%.0f") + "\" x2=\"" +
       num(F::kLeft + F::kPlotW, "%.0f") + "\" y2=\"" + num(y0, "%.0f") + "\" stroke=\"#444\"/>\n";
  s += "<line x1=\"" + num(F::kLeft, "%.0f") + "\" y1=\"" + num(F::kTop, "%.0f") + "\" x2=\"" +
       num(F::kLeft, "%.0f") + "\" y2=\"" + num(y0, "%.0f") + "\" stroke=\"#444\"/>\n";
  const std::uint64_t every = std::max<std::uint64_t>(1, (f.n + 19) / 20);
  for (std::uint64_t e = 1; e <= f.n; e += every) {
    s += "<text x=\"" + num(f.x_of(e), "%.2f") + "\" y=\"" + num(y0 + 16, "%.0f") +
         "\" font-size=\"11\" text-anchor=\"middle\">" + std::to_string(e) + "</text>\n";
  }
  s += "<text x=\"" + num(F::kLeft + F::kPlotW / 2, "%.0f") + "\" y=\"" + num(F::kH - 6, "%.0f") +
       "\" font-size=\"13\" text-anchor=\"middle\">" + html_escape(x_label) + "</text>\n";
  const double ymid = F::kTop + F::kPlotH / 2;
  s += "<text x=\"16\" y=\"" + num(ymid, "%.0f") +
       "\" font-size=\"13\" text-anchor=\"middle\" transform=\"rotate(-90 16 " + num(ymid, "%.0f") +
       ")\">" + html_escape(y_label) + "</text>\n";
  return s;
}

std::string y_tick(double y, const std::string& label) {
  using F = Frame;
  return "<line x1=\"" + num(F::kLeft - 4, "%.0f") + "\" y1=\"" + num(y, "%.2f") + "\" x2=\"" +
         num(F::kLeft + F::kPlotW, "%.0f") + "\" y2=\"" + num(y, "%.2f") +
         "\" stroke=\"#eee\"/><text x=\"" + num(F::kLeft - 6, "%.0f") + "\" y=\"" +
         num(y + 4, "%.2f") + "\" font-size=\"11\" text-anchor=\"end\">" + html_escape(label) +
         "</text>\n";
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  std::vector<double> out;
  if (!(std::isfinite(lo) && std::isfinite(hi)) || !(hi > lo) || count < 1) return out;
  const double raw = (hi - lo) / count;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    out.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return out;
}

std::string gauge(double measured, double limit) {
  const bool ok = measured <= limit;
  const double scale = std::max(2.0 * limit, measured);
  double frac = scale > 0 && std::isfinite(measured) ? measured / scale : (ok ? 0.0 : 1.0);
  if (std::isnan(measured)) frac = 1.0;
  const double limit_x = scale > 0 ? 160.0 * limit / scale : 0.0;
  return "<svg viewBox=\"0 0 164 14\" width=\"164\" height=\"14\" "
         "xmlns=\"http://www.w3.org/2000/svg\">"
         "<rect x=\"0\" y=\"2\" width=\"160\" height=\"10\" fill=\"#eee\"/><rect x=\"0\" y=\"2\" "
         "width=\"" +
         num(std::max(160.0 * frac, ok ? 0.0 : 3.0), "%.2f") + "\" height=\"10\" fill=\"" +
         (ok ? "#2e9d4f" : "#c62828") + "\"/><line x1=\"" + num(limit_x, "%.2f") +
         "\" y1=\"0\" x2=\"" + num(limit_x, "%.2f") +
         "\" y2=\"14\" stroke=\"#222\" stroke-width=\"2\"/></svg>";
}

}  // namespace html
}  // namespace vt::verifier
