# `cmake --install build --prefix P` installs the public API's headers (include/dpt/*.h,
# and the generated version.h) under P/include/dpt, the libraries, the programs, and a
# CMake package so another project can:
#   find_package(dpt REQUIRED)   target_link_libraries(app PRIVATE dpt::dpt)
# The internal headers (comm/, models/, parallel/, ...) are not installed: the public
# headers include nothing of them (tests/install/library_programs.sh checks both).
include(CMakePackageConfigHelpers)

set(_dpt_targets dpt_device dpt_comm dpt_backend_tcp dpt_backends)
foreach(t dpt_backend_mpi dpt_backend_nccl)  # where this build has them
  if(TARGET ${t})
    list(APPEND _dpt_targets ${t})
  endif()
endforeach()
foreach(t dpt_kernels_cuda dpt_kernels_cpu dpt_nn dpt_io dpt_zoo dpt_models dpt_data dpt_optim dpt_parallel dpt_precision dpt_ddp dpt_zero dpt_diloco dpt_train dpt_api)
  if(TARGET ${t})
    list(APPEND _dpt_targets ${t})
  endif()
endforeach()
install(TARGETS ${_dpt_targets} dpt_warnings EXPORT dptTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(p launch demo comm_bench train train_local zero_consolidate tokenize generate)
  if(TARGET ${p})
    install(TARGETS ${p} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dpt/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dpt
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/dpt/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dpt)
install(EXPORT dptTargets NAMESPACE dpt:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dpt)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dptConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dptConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dpt)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dptConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dptConfig.cmake ${PROJECT_BINARY_DIR}/dptConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dpt)
