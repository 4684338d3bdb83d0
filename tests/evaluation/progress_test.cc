#include "evaluation/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace ballot::evaluation {
namespace {

std::string read_all(std::FILE* file) {
  std::rewind(file);
  std::string text;
  char buffer[256];
  while (std::fgets(buffer, sizeof(buffer), file)) text += buffer;
  return text;
}

TEST(FormatDuration, SecondsMinutesHours) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(45.4), "45s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(-1), "?");
}

TEST(ProgressBar, StatusCountsWorkAndEstimates) {
  ProgressBar bar(nullptr, false, 4, 100.0);
  EXPECT_NE(bar.status(0).find("0/4 cells"), std::string::npos);
  EXPECT_NE(bar.status(0).find("ETA ?"), std::string::npos);  // nothing done: no estimate
  bar.add_work(25);
  bar.cell_done("a");
  const auto status = bar.status(60);  // a quarter in one minute: three more minutes
  EXPECT_NE(status.find("1/4 cells"), std::string::npos) << status;
  EXPECT_NE(status.find(" 25%"), std::string::npos) << status;
  EXPECT_NE(status.find("ETA 3m00s"), std::string::npos) << status;
  EXPECT_NE(status.find("[#######......................."), std::string::npos) << status;
  bar.cell_done("skipped", 75);  // a skipped cell's work counts as done
  EXPECT_NE(bar.status(60).find("100%"), std::string::npos);
}

TEST(ProgressBar, PlainLinesWhenNotATerminal) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressBar bar(file, false, 2, 10.0);
    bar.add_work(5);
    bar.cell_done("first cell");
    bar.add_work(5);
    bar.cell_done("second cell");
    bar.finish();
  }
  const auto text = read_all(file);
  std::fclose(file);
  EXPECT_NE(text.find("[1/2] first cell"), std::string::npos) << text;
  EXPECT_NE(text.find("[2/2] second cell"), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos);  // no in-place redraws in a log
  EXPECT_EQ(text.find("\033["), std::string::npos);
}

TEST(ProgressBar, RedrawsInPlaceOnATerminal) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressBar bar(file, true, 1, 10.0);
    bar.cell_done("only cell", 10);
    bar.finish();
  }
  const auto text = read_all(file);
  std::fclose(file);
  EXPECT_NE(text.find("\r\033[Konly cell\n"), std::string::npos) << text;
  EXPECT_NE(text.find("1/1 cells 100%"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
}

TEST(ProgressBar, ConcurrentUpdates) {
  ProgressBar bar(nullptr, false, 8, 8000.0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) bar.add_work(2);
      bar.cell_done("x");
      bar.cell_done("y");
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_NE(bar.status(1).find("8/8 cells 100%"), std::string::npos);
}

}  // namespace
}  // namespace ballot::evaluation
