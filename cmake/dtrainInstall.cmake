include(CMakePackageConfigHelpers)
set(DTRAIN_CMAKE_DIR ${CMAKE_INSTALL_DATADIR}/cmake/dtrain)
install(TARGETS dtrain dtrain_app EXPORT dtrainTargets)
install(DIRECTORY include/dtrain DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${DTRAIN_GENERATED_INCLUDE_DIR}/dtrain/config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dtrain)
install(EXPORT dtrainTargets NAMESPACE dtrain:: DESTINATION ${DTRAIN_CMAKE_DIR})
configure_package_config_file(cmake/dtrainConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/dtrainConfig.cmake
                              INSTALL_DESTINATION ${DTRAIN_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dtrainConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dtrainConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/dtrainConfigVersion.cmake
              cmake/dtrainDependencies.cmake
        DESTINATION ${DTRAIN_CMAKE_DIR})
