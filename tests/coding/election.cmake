# Tests of the election codes (issue 5). Included by tests/coding/CMakeLists.txt.
ballot_add_gtest(coding_election_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/allocation_matrix_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/tolerance_test.cc
  LIBS ballot::coding)
