// A small SVG line-plot writer for the evaluation report (no external program): axes with
// "nice" ticks (1, 2, 5 × 10^k), axis labels, a title, one polyline with markers per series and a
// legend. A figure may hold several panels (a grid of plots) sharing one legend, with the same
// colour for the same series label in every panel.
// Output is a standalone, well-formed SVG 1.1 document (text is XML-escaped). Non-finite points
// are skipped; an empty plot still draws its axes. Deterministic: the same input gives the same
// bytes. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ballot::evaluation {

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in the given order
  bool dashed = false;
};

struct Plot {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  // Fixed axis ranges; unset: the data's range (padded to nice ticks).
  std::optional<double> x_min, x_max, y_min, y_max;
};

struct FigureOptions {
  std::string title;             // above all panels; may be empty
  std::size_t columns = 2;       // panels per row
  int panel_width = 420;         // pixels
  int panel_height = 300;
};

// One plot as an SVG document.
std::string render_svg(const Plot& plot, int width = 640, int height = 400);
// Several plots in a grid with one legend. `panels` may be empty (an empty figure).
std::string render_figure(const std::vector<Plot>& panels, const FigureOptions& options = {});

// Tick positions covering [lo, hi] with about `target` intervals of a 1-2-5 step; lo == hi is
// widened. Returned ascending, first ≤ lo, last ≥ hi.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

std::string xml_escape(std::string_view text);

}  // namespace ballot::evaluation
