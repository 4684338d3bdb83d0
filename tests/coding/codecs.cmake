# Tests of the gradient compression codecs (issue 4).
ballot_add_gtest(coding_codecs_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/codec_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/wire_format_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/cast_codecs_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/sign_codecs_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/sparse_codecs_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/global_topk_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/quantizers_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/error_feedback_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/codec_registry_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/uniform_test.cc
  LIBS ballot::coding)
