// A small SVG writer for the evaluation report (no external program): line plots with axes,
// "nice" ticks (1, 2, 5 × 10^k), axis labels, a title, one polyline with markers per series and a
// legend, and heat maps (a coloured table of values). A figure may hold several panels (a grid of
// plots) sharing one legend, with the same colour for the same series label in every panel, or
// the colour a series names (Series::colour) — the report gives each defence one colour in every
// figure.
//
// Text fits the canvas: every string is measured with text_width() (DejaVu Sans advance widths,
// the font "sans-serif" resolves to on Debian, rounded up; wider fonts than that are rare) and the
// canvas grows to hold the figure's title and the legend; a panel's title and axis labels shrink
// (down to 9 px) and are then shortened with "…" to fit their panel. Margins follow the widest
// tick label. tests/evaluation/svg_test.cc renders figures with rsvg-convert and checks that no
// ink touches the canvas edge.
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
  // Index into the palette (modulo its size); unset: by the order labels first appear.
  std::optional<std::size_t> colour;
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
  std::string title;        // above all panels; may be empty
  std::size_t columns = 2;  // panels per row
  int panel_width = 420;    // pixels
  int panel_height = 300;
};

// A table of values as coloured cells (a sequential colour scale from the lowest to the highest
// value, or [min, max] when set), each cell labelled with its value; missing values are grey
// and labelled "n/a". Rows are drawn top to bottom.
struct HeatMap {
  std::string title;
  std::string x_label;                                     // under the column labels
  std::string y_label;                                     // left of the row labels, where it fits
  std::vector<std::string> rows, columns;                  // labels
  std::vector<std::vector<std::optional<double>>> values;  // [row][column]
  std::optional<double> min, max;
  int decimals = 1;  // of the cell labels
};

// The rendered width in pixels of `text` at `font_size` (an upper estimate for sans-serif).
double text_width(std::string_view text, double font_size, bool bold = false);
// The colour of a palette index (modulo its size), "#RRGGBB".
std::string palette_colour(std::size_t index);

// One plot as an SVG document.
std::string render_svg(const Plot& plot, int width = 640, int height = 400);
// Several plots in a grid with one legend. `panels` may be empty (an empty figure).
std::string render_figure(const std::vector<Plot>& panels, const FigureOptions& options = {});
// Heat maps stacked vertically under one title.
std::string render_heat_maps(const std::vector<HeatMap>& maps, const std::string& title = "");

// Tick positions covering [lo, hi] with about `target` intervals of a 1-2-5 step; lo == hi is
// widened. Returned ascending, first ≤ lo, last ≥ hi.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

std::string xml_escape(std::string_view text);

}  // namespace ballot::evaluation
