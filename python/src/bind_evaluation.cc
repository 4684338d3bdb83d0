// ballot._native bindings of evaluation/: run an attack × defence × b grid with the lockstep
// engine (the same code as `ballot evaluate`) and hand back results.json's text.
#include <nanobind/stl/string.h>

#include <cstdio>

#include "evaluation/grid.h"
#include "evaluation/report.h"
#include "evaluation/runner.h"
#include "python/src/native.h"

namespace ballot::python {
namespace {

std::string run(const evaluation::Grid& grid, std::size_t jobs, bool progress, const std::string& report_dir) {
  if (jobs == 0) throw nb::value_error("jobs: must be at least 1");
  unwrap(grid.validate());
  if (!report_dir.empty()) unwrap(evaluation::prepare_report_dir(report_dir));  // before hours of cells
  Result<evaluation::GridResult> result = make_error(ErrorCode::kInternal, "not run");
  std::string json;
  {
    nb::gil_scoped_release released;
    // Counted as `ballot evaluate` counts them: the learning-rate sweep's cells too.
    const auto [cells, work] = evaluation::grid_work(grid);
    evaluation::ProgressBar bar(progress ? stderr : nullptr, progress && evaluation::ProgressBar::is_terminal(stderr),
                                cells, work);
    evaluation::RunnerOptions options;
    options.jobs = jobs;
    options.progress = progress ? &bar : nullptr;
    result = evaluation::run_grid(grid, options);
    if (result.ok()) {
      json = evaluation::results_json(*result);
      if (!report_dir.empty()) {
        Status written = evaluation::write_report(*result, report_dir);
        if (!written.ok()) result = std::move(written).error();
      }
    }
  }
  unwrap(std::move(result));
  return json;
}

std::string run_json(const std::string& grid_json, std::size_t jobs, bool progress, const std::string& report_dir) {
  return run(unwrap(evaluation::parse_grid(grid_json)), jobs, progress, report_dir);
}

std::string run_paper_preset(std::uint64_t rounds, std::size_t jobs, bool progress, const std::string& report_dir) {
  return run(evaluation::paper_preset(rounds), jobs, progress, report_dir);
}

}  // namespace

void register_evaluation(nb::module_& m) {
  m.def("run_grid", &run_json, nb::arg("grid_json"), nb::arg("jobs"), nb::arg("progress"), nb::arg("report_dir"));
  m.def("run_paper_preset", &run_paper_preset, nb::arg("rounds"), nb::arg("jobs"), nb::arg("progress"),
        nb::arg("report_dir"));
}

}  // namespace ballot::python
