# Tests of the election codes. Included by tests/coding/CMakeLists.txt.
ballot_add_gtest(coding_election_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/allocation_matrix_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/allocation_analysis_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/tolerance_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/code_search_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/election_encoder_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/election_monte_carlo_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/code_report_test.cc
  LIBS ballot::coding)

ballot_add_fuzz_target(allocation_matrix_fuzz
  SOURCE ${PROJECT_SOURCE_DIR}/tests/fuzz/allocation_matrix_fuzz.cc
  LIBS ballot::coding
  CORPUS ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/allocation_matrix)
