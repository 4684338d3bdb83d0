# install() + export so that find_package(Ballot) gives ballot::core, ballot::kernels, ...
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

get_property(ballot_targets GLOBAL PROPERTY BALLOT_EXPORTED_TARGETS)
install(TARGETS ${ballot_targets} EXPORT BallotTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(module core kernels learning coding robust transport attacks runtime)
  install(DIRECTORY ${module}/ DESTINATION include/ballot/${module}
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(FILES "${PROJECT_BINARY_DIR}/generated/core/config.h" DESTINATION include/ballot/core)
install(EXPORT BallotTargets NAMESPACE ballot:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Ballot)
configure_package_config_file(cmake/BallotConfig.cmake.in
  "${PROJECT_BINARY_DIR}/BallotConfig.cmake"
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Ballot)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/BallotConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/BallotConfig.cmake" "${PROJECT_BINARY_DIR}/BallotConfigVersion.cmake"
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Ballot)
