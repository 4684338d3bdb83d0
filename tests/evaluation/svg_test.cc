#include "evaluation/svg.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "xml_check.h"

namespace ballot::evaluation {
namespace {

using testing::xml_problem;

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST(XmlCheck, CatchesBrokenDocuments) {
  EXPECT_EQ(xml_problem("<svg><g></g></svg>", "svg"), "");
  EXPECT_NE(xml_problem("<svg><g></svg>", "svg"), "");
  EXPECT_NE(xml_problem("<svg></svg><svg></svg>", "svg"), "");
  EXPECT_NE(xml_problem("<svg>a & b</svg>", "svg"), "");
  EXPECT_NE(xml_problem("<svg x=\"1></svg>", "svg"), "");
  EXPECT_NE(xml_problem("<html></html>", "svg"), "");
}

TEST(NiceTicks, OneTwoFiveSteps) {
  EXPECT_EQ(nice_ticks(0, 100, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(0, 1, 5), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  const auto ticks = nice_ticks(13, 987, 5);
  EXPECT_LE(ticks.front(), 13);
  EXPECT_GE(ticks.back(), 987);
  EXPECT_DOUBLE_EQ(ticks[1] - ticks[0], 200.0);
  const auto flat = nice_ticks(5, 5, 5);  // a constant series still gets an axis
  EXPECT_LT(flat.front(), 5);
  EXPECT_GT(flat.back(), 5);
  const auto bad = nice_ticks(std::nan(""), 1, 5);
  EXPECT_FALSE(bad.empty());
}

TEST(XmlEscape, FivePredefinedEntitiesAndControls) {
  EXPECT_EQ(xml_escape("a<b & \"c\" > 'd'"), "a&lt;b &amp; &quot;c&quot; &gt; &apos;d&apos;");
  EXPECT_EQ(xml_escape(std::string("x\x01y")), "x y");
}

TEST(RenderSvg, WellFormedWithAxesTicksLabelsAndLegend) {
  Plot plot;
  plot.title = "accuracy <n=5 & b=1>";
  plot.x_label = "round";
  plot.y_label = "test accuracy (%)";
  plot.y_min = 0;
  plot.y_max = 100;
  plot.series.push_back({"no attack", {{0, 10}, {50, 60}, {100, 80}}, true});
  plot.series.push_back({"reverse", {{0, 10}, {50, 40}, {100, std::numeric_limits<double>::quiet_NaN()}}, false});
  const auto svg = render_svg(plot);
  EXPECT_EQ(xml_problem(svg, "svg"), "") << svg;
  EXPECT_EQ(count(svg, "<svg "), 1u);
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_NE(svg.find("accuracy &lt;n=5 &amp; b=1&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">round</text>"), std::string::npos);
  EXPECT_NE(svg.find(">test accuracy (%)</text>"), std::string::npos);
  EXPECT_NE(svg.find("class=\"legend\""), std::string::npos);
  EXPECT_NE(svg.find(">no attack</text>"), std::string::npos);
  EXPECT_NE(svg.find(">reverse</text>"), std::string::npos);
  EXPECT_NE(svg.find(">100</text>"), std::string::npos);  // y ticks 0..100
  EXPECT_NE(svg.find(">60</text>"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);  // the dashed baseline
  EXPECT_EQ(count(svg, "<circle"), 5u);                        // the NaN point is skipped
  EXPECT_EQ(render_svg(plot), svg);                            // deterministic
}

TEST(RenderFigure, PanelsShareColoursAndOneLegend) {
  Plot a, b;
  a.title = "signSGD-MV";
  b.title = "deterministic";
  a.series.push_back({"reverse", {{0, 1}, {1, 2}}, false});
  a.series.push_back({"random", {{0, 1}, {1, 3}}, false});
  b.series.push_back({"random", {{0, 2}, {1, 2}}, false});
  b.series.push_back({"reverse", {{0, 2}, {1, 1}}, false});
  FigureOptions options;
  options.title = "n = 5, b = 1";
  options.columns = 2;
  const auto svg = render_figure({a, b}, options);
  EXPECT_EQ(xml_problem(svg, "svg"), "") << svg;
  EXPECT_EQ(count(svg, "class=\"panel\""), 2u);
  EXPECT_EQ(count(svg, "class=\"legend\""), 1u);
  EXPECT_EQ(count(svg, ">reverse</text>"), 1u);  // one legend entry per label
  // "reverse" has the same colour in both panels: the first palette colour.
  EXPECT_EQ(count(svg, "<polyline fill=\"none\" stroke=\"#0072B2\""), 2u);
  EXPECT_EQ(count(svg, "<polyline fill=\"none\" stroke=\"#D55E00\""), 2u);
}

TEST(RenderFigure, SeriesColourOverridesTheLabelOrder) {
  Plot a;
  a.series.push_back({"median/fp32", {{0, 1}, {1, 2}}, false, 2});  // the third defence
  const auto svg = render_figure({a}, {});
  EXPECT_EQ(count(svg, "<polyline fill=\"none\" stroke=\"" + palette_colour(2) + "\""), 1u);
  EXPECT_EQ(count(svg, "stroke=\"" + palette_colour(0) + "\""), 0u);
}

TEST(TextWidth, FollowsTheGlyphs) {
  EXPECT_EQ(text_width("", 12), 0.0);
  EXPECT_LT(text_width("iiii", 12), text_width("MMMM", 12));
  EXPECT_GT(text_width("title", 16, true), text_width("title", 16, false));
  EXPECT_DOUBLE_EQ(text_width("ab", 24), 2.0 * text_width("ab", 12));
  // A multi-byte UTF-8 character counts once, as a wide glyph.
  EXPECT_DOUBLE_EQ(text_width("×", 10), text_width("W", 10) / 0.989);
}

TEST(RenderFigure, ALongTitleWidensTheCanvas) {
  Plot plot;
  plot.title = "n = 9";
  plot.series.push_back({"signSGD-MV", {{1, 80}, {2, 79}}, false});
  FigureOptions options;
  options.title = "Worst case over attacks against the number of Byzantine nodes";
  options.columns = 1;
  const auto svg = render_figure({plot}, options);
  const auto at = svg.find("width=\"");
  ASSERT_NE(at, std::string::npos);
  const double width = std::stod(svg.substr(at + 7));
  EXPECT_GE(width, text_width(options.title, 16, true) + 16);
}

TEST(RenderHeatMaps, CellsLabelsAndMissingValues) {
  HeatMap map;
  map.title = "n = 9";
  map.x_label = "Byzantine nodes b";
  map.rows = {"signSGD-MV", "median/fp32"};
  map.columns = {"b = 1", "b = 2"};
  map.values = {{84.25, 80.0}, {std::nullopt, 70.5}};
  const auto svg = render_heat_maps({map}, "Worst-case test accuracy (%)");
  EXPECT_EQ(xml_problem(svg, "svg"), "") << svg;
  EXPECT_EQ(count(svg, "<rect x="), 4u);
  EXPECT_NE(svg.find(">84.2</text>"), std::string::npos);  // one decimal
  EXPECT_NE(svg.find(">n/a</text>"), std::string::npos);
  EXPECT_NE(svg.find(">median/fp32</text>"), std::string::npos);
  EXPECT_NE(svg.find(">b = 2</text>"), std::string::npos);
  EXPECT_EQ(xml_problem(render_heat_maps({}, ""), "svg"), "");
  // A fixed scale: the ends of the range get the ends of the colour scale, whatever the data.
  map.min = 0.0;
  map.max = 100.0;
  map.values = {{100.0, 0.0}, {50.0, std::nullopt}};
  const auto fixed = render_heat_maps({map});
  EXPECT_NE(fixed.find("fill=\"#440154\""), std::string::npos) << fixed;  // 100: darkest
  EXPECT_NE(fixed.find("fill=\"#FDE725\""), std::string::npos) << fixed;  // 0: lightest
}

// ---- rendered text extents ------------------------------------------------------------------
// The figures are rendered by rsvg-convert (librsvg, Debian package librsvg2-bin, in
// scripts/setup.sh) into PNG, decoded here with zlib, and checked for ink on the canvas edge: text
// that does not fit the canvas is cut there, so any non-white pixel in the outermost row or
// column means clipped text (no frame or line is drawn at the edge).

struct Image {
  std::size_t width = 0, height = 0;
  std::vector<std::uint8_t> rgba;  // width × height × 4
  bool ink(std::size_t x, std::size_t y) const {
    const std::uint8_t* p = &rgba[(y * width + x) * 4];
    // Anti-aliased edges of black text on white stay well below 250 in some channel.
    return p[3] > 16 && (p[0] < 250 || p[1] < 250 || p[2] < 250);
  }
};

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

// An 8-bit RGBA or RGB, non-interlaced PNG (what rsvg-convert writes).
std::optional<Image> decode_png(const std::string& bytes) {
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  if (bytes.size() < 8 || bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return std::nullopt;
  Image image;
  int channels = 0;
  std::string idat;
  for (std::size_t off = 8; off + 12 <= bytes.size();) {
    const std::uint32_t length = be32(data + off);
    if (length > bytes.size() - off - 12) return std::nullopt;
    const std::string type = bytes.substr(off + 4, 4);
    const std::uint8_t* body = data + off + 8;
    if (type == "IHDR") {
      image.width = be32(body);
      image.height = be32(body + 4);
      if (body[8] != 8 || body[12] != 0) return std::nullopt;  // 8-bit, not interlaced
      channels = body[9] == 6 ? 4 : body[9] == 2 ? 3 : 0;
      if (channels == 0) return std::nullopt;
    } else if (type == "IDAT") {
      idat.append(bytes, off + 8, length);
    }
    off += 12 + length;
  }
  if (image.width == 0 || image.height == 0 || channels == 0) return std::nullopt;
  const std::size_t stride = image.width * static_cast<std::size_t>(channels);
  std::vector<std::uint8_t> raw(image.height * (stride + 1));
  uLongf raw_size = raw.size();
  if (uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK ||
      raw_size != raw.size()) {
    return std::nullopt;
  }
  // Undo the per-row filters (PNG spec §9): None, Sub, Up, Average, Paeth.
  std::vector<std::uint8_t> pixels(image.height * stride);
  const std::size_t bpp = static_cast<std::size_t>(channels);
  for (std::size_t y = 0; y < image.height; ++y) {
    const std::uint8_t filter = raw[y * (stride + 1)];
    const std::uint8_t* in = &raw[y * (stride + 1) + 1];
    std::uint8_t* out = &pixels[y * stride];
    const std::uint8_t* up = y > 0 ? &pixels[(y - 1) * stride] : nullptr;
    for (std::size_t i = 0; i < stride; ++i) {
      const int a = i >= bpp ? out[i - bpp] : 0, b = up ? up[i] : 0, c = (up && i >= bpp) ? up[i - bpp] : 0;
      int predicted = 0;
      switch (filter) {
        case 0:
          predicted = 0;
          break;
        case 1:
          predicted = a;
          break;
        case 2:
          predicted = b;
          break;
        case 3:
          predicted = (a + b) / 2;
          break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          predicted = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default:
          return std::nullopt;
      }
      out[i] = static_cast<std::uint8_t>(in[i] + predicted);
    }
  }
  image.rgba.resize(image.width * image.height * 4);
  for (std::size_t k = 0; k < image.width * image.height; ++k) {
    for (int c = 0; c < 3; ++c) image.rgba[k * 4 + c] = pixels[k * bpp + c];
    image.rgba[k * 4 + 3] = channels == 4 ? pixels[k * bpp + 3] : 255;
  }
  return image;
}

bool have_rsvg() { return std::system("rsvg-convert --version >/dev/null 2>&1") == 0; }

// Renders `svg` with rsvg-convert in a fresh temporary directory.
std::optional<Image> rasterise(const std::string& svg) {
  char dir_template[] = "/tmp/ballot_svg_XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return std::nullopt;
  const std::filesystem::path in = std::filesystem::path(dir) / "figure.svg",
                              out = std::filesystem::path(dir) / "figure.png";
  std::ofstream(in) << svg;
  const std::string command = "rsvg-convert -f png -o '" + out.string() + "' '" + in.string() + "'";
  std::optional<Image> image;
  if (std::system(command.c_str()) == 0) {
    std::ifstream file(out, std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    image = decode_png(bytes.str());
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return image;
}

// The first ink found on the outermost rows and columns, as "x,y"; empty when there is none.
std::string ink_on_edge(const Image& image) {
  for (std::size_t y = 0; y < image.height; ++y) {
    for (std::size_t x = 0; x < image.width; ++x) {
      const bool edge = x == 0 || y == 0 || x + 1 == image.width || y + 1 == image.height;
      if (edge && image.ink(x, y)) return std::to_string(x) + "," + std::to_string(y);
    }
  }
  return "";
}

TEST(RenderedText, EstimateCoversTheRenderedWidth) {
  if (!have_rsvg())
    GTEST_SKIP() << "rsvg-convert not found (Debian: apt-get install librsvg2-bin); text extents not checked";
  for (const bool bold : {false, true}) {
    for (const std::string text : {"Worst case over attacks against the number of Byzantine nodes",
                                   "trimmed_mean:f=1/qsgd:s=16 @ lr×0.3", "MMMMWWWW mmmm", "0.0001 − 100% ≥ b"}) {
      const double size = 16.0, start = 10.0;
      const double estimate = text_width(text, size, bold);
      const int width = static_cast<int>(start + estimate + 60.0);
      const std::string svg =
          "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
          "\" height=\"40\" font-family=\"sans-serif\">" +
          "<rect width=\"100%\" height=\"100%\" fill=\"white\"/><text x=\"10\" y=\"26\" font-size=\"16\"" +
          (bold ? " font-weight=\"bold\"" : "") + ">" + xml_escape(text) + "</text></svg>\n";
      const auto image = rasterise(svg);
      ASSERT_TRUE(image.has_value()) << "rsvg-convert failed or wrote an unreadable PNG";
      std::size_t right = 0;
      for (std::size_t y = 0; y < image->height; ++y) {
        for (std::size_t x = 0; x < image->width; ++x) {
          if (image->ink(x, y)) right = std::max(right, x + 1);
        }
      }
      EXPECT_GT(right, start) << text;
      EXPECT_LE(static_cast<double>(right), start + estimate + 1.0) << text << (bold ? " (bold)" : "");
      // Not so loose that figures waste their space: within 25% of the ink.
      EXPECT_GE(static_cast<double>(right) - start, 0.75 * estimate) << text;
    }
  }
}

TEST(RenderedText, NoFigureTextIsCutAtTheCanvasEdge) {
  if (!have_rsvg())
    GTEST_SKIP() << "rsvg-convert not found (Debian: apt-get install librsvg2-bin); text extents not checked";
  std::vector<std::pair<std::string, std::string>> figures;
  {
    // The worst-case figure of a grid with one n: one panel under a long title.
    Plot plot;
    plot.title = "n = 9";
    plot.x_label = "Byzantine nodes b";
    plot.y_label = "worst-case test accuracy (%)";
    plot.series.push_back({"signSGD-MV", {{1, 84.2}, {2, 80.1}}, false, 0});
    plot.series.push_back({"median/fp32", {{1, 79.0}, {2, 77.5}}, false, 2});
    FigureOptions options;
    options.title = "Worst case over attacks against the number of Byzantine nodes";
    options.columns = 1;
    figures.emplace_back("long title", render_figure({plot}, options));
  }
  {
    // Long panel titles and axis labels, long legend labels, fine y ticks, a short panel with
    // more legend entries than fit beside it.
    Plot plot;
    plot.title = "trimmed_mean:f=1 > nnm:f=1 > krum:f=1 against ipm:eps=0.5,from=100 (did not run)";
    plot.x_label = "rounds of training, counted from the initial model, with an evaluation every 50";
    plot.y_label = "test accuracy on the first 10000 test examples (%)";
    for (int k = 0; k < 12; ++k) {
      plot.series.push_back({"defence " + std::to_string(k) + ": trimmed_mean:f=1/qsgd:s=16 @ lr×0.3",
                             {{0.0, 0.0001 * k}, {1500.0, 0.0002 * k}},
                             k % 2 == 1});
    }
    FigureOptions options;
    options.title = "x";
    options.columns = 1;
    options.panel_width = 260;
    options.panel_height = 160;
    figures.emplace_back("long labels", render_figure({plot, plot}, options));
  }
  {
    HeatMap map;
    map.title = "n = 15 — the worst case over reverse, alie, ipm:eps=0.5 and sign_flip";
    map.x_label = "Byzantine nodes b (the fault budget of the setting)";
    map.rows = {"signSGD-MV", "nnm:f=1 > trimmed_mean:f=1/qsgd:s=16,elias=1"};
    map.columns = {"b = 1", "b = 2", "b = 3"};
    map.values = {{84.2, 80.0, std::nullopt}, {12.5, 70.0, 100.0}};
    figures.emplace_back("heat map", render_heat_maps({map, map}, "Worst-case test accuracy (%) over the attacks"));
  }
  for (const auto& [name, svg] : figures) {
    ASSERT_EQ(xml_problem(svg, "svg"), "") << name;
    const auto image = rasterise(svg);
    ASSERT_TRUE(image.has_value()) << name << ": rsvg-convert failed or wrote an unreadable PNG";
    EXPECT_EQ(ink_on_edge(*image), "") << name << ": text reaches the canvas edge (clipped)";
  }
  // The check itself sees clipping: a title wider than its canvas.
  const std::string clipped =
      "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"120\" height=\"40\" "
      "font-family=\"sans-serif\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/><text x=\"60\" y=\"26\" "
      "text-anchor=\"middle\" font-size=\"16\">Worst case over attacks</text></svg>\n";
  const auto image = rasterise(clipped);
  ASSERT_TRUE(image.has_value());
  EXPECT_NE(ink_on_edge(*image), "");
}

TEST(RenderFigure, EmptyInputsStillWellFormed) {
  EXPECT_EQ(xml_problem(render_figure({}, {}), "svg"), "");
  Plot empty;
  empty.title = "nothing";
  EXPECT_EQ(xml_problem(render_svg(empty), "svg"), "");
}

}  // namespace
}  // namespace ballot::evaluation
