#include "evaluation/svg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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

TEST(RenderFigure, EmptyInputsStillWellFormed) {
  EXPECT_EQ(xml_problem(render_figure({}, {}), "svg"), "");
  Plot empty;
  empty.title = "nothing";
  EXPECT_EQ(xml_problem(render_svg(empty), "svg"), "");
}

}  // namespace
}  // namespace ballot::evaluation
