// `ballot code`: report on an election code (coding/code_report.h).
#include <cstdio>

#include "apps/commands.h"
#include "coding/code_report.h"

namespace ballot::apps {

int run_code(const CodeCommand& command) {
  Result<std::string> report = make_error(ErrorCode::kInternal, "no report");
  if (command.search_b) {
    report = coding::code_search_report(command.nodes, *command.search_b);
  } else {
    coding::CodeReportOptions options;
    options.byzantine_counts = command.byzantine_counts;
    options.q = command.q;
    options.trials = command.trials;
    options.seed = command.seed;
    auto attack = coding::parse_election_attack(command.attack);
    if (!attack.ok()) {
      std::fprintf(stderr, "ballot code: %s\n", attack.error().to_string().c_str());
      return 1;
    }
    options.attack = *attack;
    options.ties = command.abstain_ties ? coding::TieRule::kAbstain : coding::TieRule::kPlusOne;
    report = coding::code_report(command.spec, command.nodes, options);
  }
  if (!report.ok()) {
    std::fprintf(stderr, "ballot code: %s\n", report.error().to_string().c_str());
    return 1;
  }
  std::fputs(report->c_str(), stdout);
  return 0;
}

}  // namespace ballot::apps
