# Gradient compression codecs: sources of ballot::coding owned by the codecs half.
set(BALLOT_CODING_CODEC_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/codec.cc
  ${CMAKE_CURRENT_LIST_DIR}/wire_format.cc
  ${CMAKE_CURRENT_LIST_DIR}/cast_codecs.cc
  ${CMAKE_CURRENT_LIST_DIR}/sign_codecs.cc
  ${CMAKE_CURRENT_LIST_DIR}/sparse_codecs.cc
  ${CMAKE_CURRENT_LIST_DIR}/global_topk.cc
  ${CMAKE_CURRENT_LIST_DIR}/dgc.cc
  ${CMAKE_CURRENT_LIST_DIR}/quantizers.cc
  ${CMAKE_CURRENT_LIST_DIR}/error_feedback.cc
  ${CMAKE_CURRENT_LIST_DIR}/codec_registry.cc
  ${CMAKE_CURRENT_LIST_DIR}/detail/loops.cc
  ${CMAKE_CURRENT_LIST_DIR}/detail/sparse.cc
  ${CMAKE_CURRENT_LIST_DIR}/detail/rounding.cc)
# The per-coordinate loops are written to vectorise (independent lanes, no reassociation needed):
# -O3 lets GCC do it outside Debug builds; -fno-trapping-math lets it turn float conditionals
# into selects (it only drops FP exception flags, never changes a value); no FMA contraction and
# no reassociation, so every build and every clone computes the same bits.
set_source_files_properties(${BALLOT_CODING_CODEC_SOURCES} PROPERTIES
  COMPILE_OPTIONS "-ffp-contract=off;-fno-trapping-math;$<$<NOT:$<CONFIG:Debug>>:-O3>")
