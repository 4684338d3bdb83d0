# Election codes: allocation matrices, their Boost.Graph analysis, tolerance
# certificates, minimum-redundancy search, encoder/decoder, Monte Carlo
# error estimates and the text report. Included by coding/CMakeLists.txt.
find_package(Boost CONFIG REQUIRED COMPONENTS graph)
set(BALLOT_CODING_ELECTION_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/allocation_matrix.cc
  ${CMAKE_CURRENT_LIST_DIR}/allocation_analysis.cc
  ${CMAKE_CURRENT_LIST_DIR}/tolerance.cc
  ${CMAKE_CURRENT_LIST_DIR}/code_search.cc
  ${CMAKE_CURRENT_LIST_DIR}/election_encoder.cc
  ${CMAKE_CURRENT_LIST_DIR}/election_monte_carlo.cc
  ${CMAKE_CURRENT_LIST_DIR}/code_report.cc)
# The Boost.Graph algorithms used are header-only.
list(APPEND BALLOT_CODING_LIBRARIES Boost::headers)
