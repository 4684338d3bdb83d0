#include "evaluation/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

namespace ballot::evaluation {
namespace {

// Colour-blind-friendly palette (Okabe–Ito, then a few more).
constexpr const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                    "#56B4E9", "#000000", "#F0E442", "#8C564B", "#7F7F7F"};
constexpr std::size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

std::string num(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", value);
  return text;
}

// A tick label without trailing zeros: 0.5, 100, 2.5e+05 for very large values.
std::string tick_label(double value, double step) {
  if (std::abs(value) < step * 1e-9) value = 0.0;
  char text[32];
  if (std::abs(value) >= 1e6) {
    std::snprintf(text, sizeof(text), "%.3g", value);
  } else {
    const int decimals = step >= 1.0 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
    std::snprintf(text, sizeof(text), "%.*f", std::clamp(decimals, 0, 8), value);
  }
  return text;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

struct Box {
  double x, y, w, h;
};

// Draws `plot` into `box` (the whole panel, title and labels included).
void draw_plot(std::string& out, const Plot& plot, Box box, const std::map<std::string, std::size_t>& colours) {
  Range xr, yr;
  for (const auto& s : plot.series) {
    for (const auto& [x, y] : s.points) {
      if (std::isfinite(x) && std::isfinite(y)) {
        xr.add(x);
        yr.add(y);
      }
    }
  }
  if (xr.empty()) xr = {0.0, 1.0};
  if (yr.empty()) yr = {0.0, 1.0};
  if (plot.x_min) xr.lo = *plot.x_min;
  if (plot.x_max) xr.hi = *plot.x_max;
  if (plot.y_min) yr.lo = *plot.y_min;
  if (plot.y_max) yr.hi = *plot.y_max;
  const auto xt = nice_ticks(xr.lo, xr.hi, 5);
  const auto yt = nice_ticks(yr.lo, yr.hi, 5);
  const double x0 = plot.x_min ? *plot.x_min : xt.front(), x1 = plot.x_max ? *plot.x_max : xt.back();
  const double y0 = plot.y_min ? *plot.y_min : yt.front(), y1 = plot.y_max ? *plot.y_max : yt.back();
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1.0, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1.0;

  // Plot area inside the panel: room for the title, tick labels and axis labels.
  const Box area{box.x + 62, box.y + 30, box.w - 62 - 14, box.h - 30 - 48};
  const auto px = [&](double x) { return area.x + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * area.w; };
  const auto py = [&](double y) { return area.y + area.h - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * area.h; };

  out += "<g class=\"panel\">\n";
  out += "<text x=\"" + num(box.x + box.w / 2) + "\" y=\"" + num(box.y + 18) +
         "\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">" + xml_escape(plot.title) + "</text>\n";
  out += "<rect x=\"" + num(area.x) + "\" y=\"" + num(area.y) + "\" width=\"" + num(area.w) + "\" height=\"" +
         num(area.h) + "\" fill=\"none\" stroke=\"#444\" stroke-width=\"1\"/>\n";
  for (double t : xt) {
    if (t < x0 - 1e-9 * xstep || t > x1 + 1e-9 * xstep) continue;
    const std::string x = num(px(t));
    out += "<line x1=\"" + x + "\" y1=\"" + num(area.y) + "\" x2=\"" + x + "\" y2=\"" + num(area.y + area.h) +
           "\" stroke=\"#ddd\" stroke-width=\"1\"/>\n";
    out += "<line x1=\"" + x + "\" y1=\"" + num(area.y + area.h) + "\" x2=\"" + x + "\" y2=\"" +
           num(area.y + area.h + 5) + "\" stroke=\"#444\" stroke-width=\"1\"/>\n";
    out += "<text x=\"" + x + "\" y=\"" + num(area.y + area.h + 18) + "\" text-anchor=\"middle\" font-size=\"11\">" +
           xml_escape(tick_label(t, xstep)) + "</text>\n";
  }
  for (double t : yt) {
    if (t < y0 - 1e-9 * ystep || t > y1 + 1e-9 * ystep) continue;
    const std::string y = num(py(t));
    out += "<line x1=\"" + num(area.x) + "\" y1=\"" + y + "\" x2=\"" + num(area.x + area.w) + "\" y2=\"" + y +
           "\" stroke=\"#ddd\" stroke-width=\"1\"/>\n";
    out += "<line x1=\"" + num(area.x - 5) + "\" y1=\"" + y + "\" x2=\"" + num(area.x) + "\" y2=\"" + y +
           "\" stroke=\"#444\" stroke-width=\"1\"/>\n";
    out += "<text x=\"" + num(area.x - 8) + "\" y=\"" + num(py(t) + 4) + "\" text-anchor=\"end\" font-size=\"11\">" +
           xml_escape(tick_label(t, ystep)) + "</text>\n";
  }
  out += "<text x=\"" + num(area.x + area.w / 2) + "\" y=\"" + num(box.y + box.h - 8) +
         "\" text-anchor=\"middle\" font-size=\"12\">" + xml_escape(plot.x_label) + "</text>\n";
  const double ly = area.y + area.h / 2, lx = box.x + 16;
  out += "<text x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 " +
         num(lx) + " " + num(ly) + ")\">" + xml_escape(plot.y_label) + "</text>\n";

  for (const auto& s : plot.series) {
    const auto colour = kPalette[colours.at(s.label) % kPaletteSize];
    std::string points;
    std::string markers;
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      // Points outside a fixed range are clamped to the frame rather than drawn outside it.
      const double cx = std::clamp(px(x), area.x, area.x + area.w), cy = std::clamp(py(y), area.y, area.y + area.h);
      points += (points.empty() ? "" : " ") + num(cx) + "," + num(cy);
      markers += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(cy) + "\" r=\"2.5\" fill=\"" + colour + "\"/>\n";
    }
    if (points.empty()) continue;
    out += "<polyline fill=\"none\" stroke=\"" + std::string(colour) + "\" stroke-width=\"1.8\"" +
           (s.dashed ? " stroke-dasharray=\"6,3\"" : "") + " points=\"" + points + "\"/>\n";
    out += markers;
  }
  out += "</g>\n";
}

std::map<std::string, std::size_t> colour_map(const std::vector<Plot>& plots, std::vector<const Series*>& legend) {
  std::map<std::string, std::size_t> colours;
  for (const auto& plot : plots) {
    for (const auto& s : plot.series) {
      if (colours.emplace(s.label, colours.size()).second) legend.push_back(&s);
    }
  }
  return colours;
}

void draw_legend(std::string& out, const std::vector<const Series*>& legend, const std::map<std::string, std::size_t>& colours,
                 double x, double y) {
  out += "<g class=\"legend\">\n";
  for (std::size_t i = 0; i < legend.size(); ++i) {
    const double row = y + 18.0 * static_cast<double>(i);
    const auto colour = kPalette[colours.at(legend[i]->label) % kPaletteSize];
    out += "<line x1=\"" + num(x) + "\" y1=\"" + num(row) + "\" x2=\"" + num(x + 22) + "\" y2=\"" + num(row) +
           "\" stroke=\"" + colour + "\" stroke-width=\"2\"" + (legend[i]->dashed ? " stroke-dasharray=\"6,3\"" : "") + "/>\n";
    out += "<text x=\"" + num(x + 28) + "\" y=\"" + num(row + 4) + "\" font-size=\"12\">" + xml_escape(legend[i]->label) +
           "</text>\n";
  }
  out += "</g>\n";
}

std::string header(double width, double height) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" +
         num(width) + "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
         "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

double legend_width(const std::vector<const Series*>& legend) {
  std::size_t longest = 0;
  for (const auto* s : legend) longest = std::max(longest, s->label.size());
  return legend.empty() ? 0.0 : 44.0 + 7.0 * static_cast<double>(longest);
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0.0, hi = 1.0;
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) {
    const double pad = lo == 0.0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  target = std::max(target, 1);
  const double raw = (hi - lo) / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  const double first = std::floor(lo / step + 1e-9) * step;
  std::vector<double> ticks;
  for (double t = first; ticks.size() < 64; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
    if (t >= hi - step * 1e-9) break;
  }
  return ticks;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string render_svg(const Plot& plot, int width, int height) {
  return render_figure({plot}, FigureOptions{.title = "", .columns = 1, .panel_width = width, .panel_height = height});
}

std::string render_figure(const std::vector<Plot>& panels, const FigureOptions& options) {
  std::vector<const Series*> legend;
  const auto colours = colour_map(panels, legend);
  const std::size_t columns = std::max<std::size_t>(1, std::min(options.columns, std::max<std::size_t>(1, panels.size())));
  const std::size_t rows = (panels.size() + columns - 1) / columns;
  const double top = options.title.empty() ? 0.0 : 32.0;
  const double lw = legend_width(legend);
  const double width = static_cast<double>(columns) * options.panel_width + lw;
  const double height = top + std::max<double>(1.0, static_cast<double>(rows) * options.panel_height);
  std::string out = header(width, height);
  if (!options.title.empty()) {
    out += "<text x=\"" + num((width - lw) / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">" +
           xml_escape(options.title) + "</text>\n";
  }
  for (std::size_t i = 0; i < panels.size(); ++i) {
    const double x = static_cast<double>(i % columns) * options.panel_width;
    const double y = top + static_cast<double>(i / columns) * options.panel_height;
    draw_plot(out, panels[i], {x, y, static_cast<double>(options.panel_width), static_cast<double>(options.panel_height)},
              colours);
  }
  draw_legend(out, legend, colours, static_cast<double>(columns) * options.panel_width + 4.0, top + 40.0);
  out += "</svg>\n";
  return out;
}

}  // namespace ballot::evaluation
