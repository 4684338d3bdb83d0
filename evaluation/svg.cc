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

// DejaVu Sans advance widths of printable ASCII (' ' to '~') in em, from the font's hmtx table
// (units per em 2048), rounded up.
constexpr double kAdvance[95] = {
    0.318, 0.401, 0.461, 0.838, 0.637, 0.951, 0.780, 0.276, 0.391, 0.391, 0.500, 0.838, 0.318, 0.361, 0.318, 0.337,
    0.637, 0.637, 0.637, 0.637, 0.637, 0.637, 0.637, 0.637, 0.637, 0.637, 0.337, 0.337, 0.838, 0.838, 0.838, 0.531,
    1.000, 0.685, 0.687, 0.699, 0.771, 0.632, 0.576, 0.775, 0.753, 0.295, 0.295, 0.657, 0.558, 0.863, 0.749, 0.788,
    0.604, 0.788, 0.695, 0.635, 0.611, 0.733, 0.685, 0.989, 0.686, 0.611, 0.686, 0.391, 0.337, 0.391, 0.838, 0.500,
    0.500, 0.613, 0.635, 0.550, 0.635, 0.616, 0.352, 0.635, 0.634, 0.278, 0.278, 0.580, 0.278, 0.975, 0.634, 0.613,
    0.635, 0.635, 0.412, 0.521, 0.392, 0.634, 0.592, 0.818, 0.592, 0.592, 0.525, 0.637, 0.337, 0.637, 0.838};
// Characters outside ASCII (×, −, ≥, …, Greek) are taken as wide as the widest common ones.
constexpr double kWideAdvance = 1.0;
// DejaVu Sans Bold is up to 15% wider than Book.
constexpr double kBoldFactor = 1.15;
constexpr double kMinFontSize = 9.0;

// `text` shortened with "…" (at a UTF-8 character boundary) until it fits `width`.
std::string shorten(std::string_view text, double font_size, bool bold, double width) {
  if (text_width(text, font_size, bold) <= width) return std::string(text);
  std::string cut(text);
  while (!cut.empty()) {
    cut.pop_back();
    while (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0xC0) == 0x80) cut.pop_back();
    if (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0x80) != 0) cut.pop_back();
    if (text_width(cut + "…", font_size, bold) <= width) return cut + "…";
  }
  return "";
}

struct FittedText {
  std::string text;
  double size;
};
// The font size (from `size` down to kMinFontSize) at which `text` fits `width`, shortened when
// even the smallest does not fit.
FittedText fit(std::string_view text, double size, bool bold, double width) {
  for (double s = size; s >= kMinFontSize; s -= 1.0) {
    if (text_width(text, s, bold) <= width) return {std::string(text), s};
  }
  return {shorten(text, kMinFontSize, bold, width), kMinFontSize};
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

  // Plot area inside the panel: room for the title, the y label (a 12 px line), the widest tick
  // label and half of the last x tick label, which is centred on the frame's right edge.
  double widest_y = 0.0;
  for (double t : yt) widest_y = std::max(widest_y, text_width(tick_label(t, ystep), 11));
  const double left = 26.0 + widest_y + 10.0;
  const double right = std::max(14.0, text_width(tick_label(xt.back(), xstep), 11) / 2 + 6.0);
  const Box area{box.x + left, box.y + 30, std::max(10.0, box.w - left - right), std::max(10.0, box.h - 30 - 48)};
  const auto px = [&](double x) { return area.x + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * area.w; };
  const auto py = [&](double y) { return area.y + area.h - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * area.h; };

  out += "<g class=\"panel\">\n";
  const auto title = fit(plot.title, 14, true, box.w - 16);
  out += "<text x=\"" + num(box.x + box.w / 2) + "\" y=\"" + num(box.y + 18) +
         "\" text-anchor=\"middle\" font-size=\"" + num(title.size) + "\" font-weight=\"bold\">" +
         xml_escape(title.text) + "</text>\n";
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
  // The x label is centred under the frame but may use the whole panel width around that centre.
  const double x_room = 2.0 * std::min(area.x + area.w / 2 - box.x, box.x + box.w - (area.x + area.w / 2)) - 8.0;
  const auto x_label = fit(plot.x_label, 12, false, x_room);
  out += "<text x=\"" + num(area.x + area.w / 2) + "\" y=\"" + num(box.y + box.h - 8) +
         "\" text-anchor=\"middle\" font-size=\"" + num(x_label.size) + "\">" + xml_escape(x_label.text) + "</text>\n";
  const double ly = area.y + area.h / 2, lx = box.x + 16;
  const auto y_label = fit(plot.y_label, 12, false, std::min(area.h + 40.0, box.h - 8.0));
  out += "<text x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" text-anchor=\"middle\" font-size=\"" + num(y_label.size) +
         "\" transform=\"rotate(-90 " + num(lx) + " " + num(ly) + ")\">" + xml_escape(y_label.text) + "</text>\n";

  for (const auto& s : plot.series) {
    const auto colour = kPalette[s.colour.value_or(colours.at(s.label)) % kPaletteSize];
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

void draw_legend(std::string& out, const std::vector<const Series*>& legend,
                 const std::map<std::string, std::size_t>& colours, double x, double y) {
  out += "<g class=\"legend\">\n";
  for (std::size_t i = 0; i < legend.size(); ++i) {
    const double row = y + 18.0 * static_cast<double>(i);
    const auto colour = kPalette[legend[i]->colour.value_or(colours.at(legend[i]->label)) % kPaletteSize];
    out += "<line x1=\"" + num(x) + "\" y1=\"" + num(row) + "\" x2=\"" + num(x + 22) + "\" y2=\"" + num(row) +
           "\" stroke=\"" + colour + "\" stroke-width=\"2\"" + (legend[i]->dashed ? " stroke-dasharray=\"6,3\"" : "") +
           "/>\n";
    out += "<text x=\"" + num(x + 28) + "\" y=\"" + num(row + 4) + "\" font-size=\"12\">" +
           xml_escape(legend[i]->label) + "</text>\n";
  }
  out += "</g>\n";
}

std::string header(double width, double height) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
         "width=\"" +
         num(width) + "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
         "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

double legend_width(const std::vector<const Series*>& legend) {
  double longest = 0.0;
  for (const auto* s : legend) longest = std::max(longest, text_width(s->label, 12));
  return legend.empty() ? 0.0 : 4.0 + 28.0 + longest + 12.0;
}

}  // namespace

double text_width(std::string_view text, double font_size, bool bold) {
  double em = 0.0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      em += kAdvance[c - 0x20];
    } else if ((c & 0xC0) != 0x80) {
      // The first byte of a UTF-8 sequence (continuation bytes add nothing) or a control
      // character (xml_escape turns it into a space).
      em += c < 0x80 ? kAdvance[0] : kWideAdvance;
    }
  }
  return em * font_size * (bold ? kBoldFactor : 1.0);
}

std::string palette_colour(std::size_t index) { return kPalette[index % kPaletteSize]; }

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
        out += "&apos;";
        break;
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
  const std::size_t columns =
      std::max<std::size_t>(1, std::min(options.columns, std::max<std::size_t>(1, panels.size())));
  const std::size_t rows = (panels.size() + columns - 1) / columns;
  const double top = options.title.empty() ? 0.0 : 32.0;
  const double lw = legend_width(legend);
  const double panels_width = static_cast<double>(columns) * options.panel_width;
  // The canvas holds the title: a long one over a single panel widens the figure rather than
  // being cut at both edges.
  const double title_width = options.title.empty() ? 0.0 : text_width(options.title, 16, true) + 24.0;
  const double width = std::max(panels_width + lw, title_width);
  const double legend_bottom = top + 40.0 + 18.0 * static_cast<double>(legend.size());
  const double height =
      std::max(top + std::max<double>(1.0, static_cast<double>(rows) * options.panel_height), legend_bottom);
  std::string out = header(width, height);
  if (!options.title.empty()) {
    // Centred over the panels when it fits there, else over the whole canvas.
    const double centre = title_width <= panels_width ? panels_width / 2 : width / 2;
    out += "<text x=\"" + num(centre) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">" +
           xml_escape(options.title) + "</text>\n";
  }
  for (std::size_t i = 0; i < panels.size(); ++i) {
    const double x = static_cast<double>(i % columns) * options.panel_width;
    const double y = top + static_cast<double>(i / columns) * options.panel_height;
    draw_plot(out, panels[i],
              {x, y, static_cast<double>(options.panel_width), static_cast<double>(options.panel_height)}, colours);
  }
  draw_legend(out, legend, colours, panels_width + 4.0, top + 40.0);
  out += "</svg>\n";
  return out;
}

namespace {

// A sequential scale from light yellow (low) to dark blue (high) (the ends of viridis, kept light
// enough at the low end for black labels), by linear interpolation between five stops.
std::string scale_colour(double t, bool& dark) {
  static constexpr double stops[5][3] = {{253, 231, 37}, {94, 201, 98}, {33, 145, 140}, {59, 82, 139}, {68, 1, 84}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0);
  const double pos = t * 4.0;
  const int k = std::min(3, static_cast<int>(pos));
  const double f = pos - k;
  char text[8];
  int rgb[3];
  for (int c = 0; c < 3; ++c) rgb[c] = static_cast<int>(std::lround(stops[k][c] + f * (stops[k + 1][c] - stops[k][c])));
  std::snprintf(text, sizeof(text), "#%02X%02X%02X", rgb[0], rgb[1], rgb[2]);
  dark = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] < 140.0;
  return text;
}

}  // namespace

std::string render_heat_maps(const std::vector<HeatMap>& maps, const std::string& title) {
  constexpr double kCellHeight = 28.0, kMargin = 12.0;
  // Column widths and label widths over all maps, so stacked maps line up.
  double row_label = 0.0, cell = 56.0, widest = 0.0;
  for (const auto& map : maps) {
    for (const auto& r : map.rows) row_label = std::max(row_label, text_width(r, 12));
    for (const auto& c : map.columns) cell = std::max(cell, text_width(c, 12) + 12.0);
    cell = std::max(cell, text_width("100.0", 12) + 12.0);
  }
  const double grid_left = kMargin + 20.0 + row_label + 8.0;
  double height = kMargin + (title.empty() ? 0.0 : 28.0);
  std::vector<double> tops;
  for (const auto& map : maps) {
    tops.push_back(height);
    const double table_width = cell * static_cast<double>(map.columns.size());
    widest = std::max({widest, grid_left + table_width + kMargin, text_width(map.title, 14, true) + 2 * kMargin,
                       grid_left + text_width(map.x_label, 12) + kMargin});
    height += 26.0 + kCellHeight * static_cast<double>(map.rows.size()) + 22.0 + 24.0 + 10.0;
  }
  const double width = std::max(widest, title.empty() ? 0.0 : text_width(title, 16, true) + 2 * kMargin);
  height += kMargin;
  std::string out = header(width, height);
  if (!title.empty()) {
    out += "<text x=\"" + num(width / 2) + "\" y=\"" + num(kMargin + 16) +
           "\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">" + xml_escape(title) + "</text>\n";
  }
  for (std::size_t m = 0; m < maps.size(); ++m) {
    const HeatMap& map = maps[m];
    const double top = tops[m];
    Range range;
    for (const auto& row : map.values) {
      for (const auto& v : row) {
        if (v) range.add(*v);
      }
    }
    const double lo = map.min.value_or(range.empty() ? 0.0 : range.lo);
    const double hi = map.max.value_or(range.empty() ? 1.0 : range.hi);
    out += "<g class=\"heatmap\">\n";
    out += "<text x=\"" + num(kMargin) + "\" y=\"" + num(top + 16) + "\" font-size=\"14\" font-weight=\"bold\">" +
           xml_escape(map.title) + "</text>\n";
    const double grid_top = top + 26.0;
    const double table_height = kCellHeight * static_cast<double>(map.rows.size());
    for (std::size_t r = 0; r < map.rows.size(); ++r) {
      const double y = grid_top + kCellHeight * static_cast<double>(r);
      out += "<text x=\"" + num(grid_left - 8) + "\" y=\"" + num(y + kCellHeight / 2 + 4) +
             "\" text-anchor=\"end\" font-size=\"12\">" + xml_escape(map.rows[r]) + "</text>\n";
      for (std::size_t c = 0; c < map.columns.size(); ++c) {
        const double x = grid_left + cell * static_cast<double>(c);
        const std::optional<double> v =
            r < map.values.size() && c < map.values[r].size() ? map.values[r][c] : std::nullopt;
        bool dark = false;
        const std::string fill = v ? scale_colour(hi > lo ? (*v - lo) / (hi - lo) : 1.0, dark) : "#DDDDDD";
        char label[32];
        if (v) {
          std::snprintf(label, sizeof(label), "%.*f", std::clamp(map.decimals, 0, 6), *v);
        } else {
          std::snprintf(label, sizeof(label), "n/a");
        }
        out += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(cell) + "\" height=\"" +
               num(kCellHeight) + "\" fill=\"" + fill + "\" stroke=\"white\" stroke-width=\"1\"/>\n";
        out += "<text x=\"" + num(x + cell / 2) + "\" y=\"" + num(y + kCellHeight / 2 + 4) +
               "\" text-anchor=\"middle\" font-size=\"12\" fill=\"" + (dark ? "white" : "black") + "\">" + label +
               "</text>\n";
      }
    }
    for (std::size_t c = 0; c < map.columns.size(); ++c) {
      const double x = grid_left + cell * (static_cast<double>(c) + 0.5);
      out += "<text x=\"" + num(x) + "\" y=\"" + num(grid_top + table_height + 16) +
             "\" text-anchor=\"middle\" font-size=\"12\">" + xml_escape(map.columns[c]) + "</text>\n";
    }
    out += "<text x=\"" + num(grid_left) + "\" y=\"" + num(grid_top + table_height + 38) + "\" font-size=\"12\">" +
           xml_escape(map.x_label) + "</text>\n";
    // Drawn only where it fits beside the rows at full size (the row labels name the rows anyway).
    if (!map.y_label.empty() && text_width(map.y_label, 12) <= table_height) {
      const FittedText y_label{map.y_label, 12.0};
      const double lx = kMargin + 8, ly = grid_top + table_height / 2;
      out += "<text x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" text-anchor=\"middle\" font-size=\"" +
             num(y_label.size) + "\" transform=\"rotate(-90 " + num(lx) + " " + num(ly) + ")\">" +
             xml_escape(y_label.text) + "</text>\n";
    }
    out += "</g>\n";
  }
  out += "</svg>\n";
  return out;
}

}  // namespace ballot::evaluation
