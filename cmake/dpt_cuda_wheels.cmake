# The CUDA toolchain from NVIDIA's PyPI wheels, for machines without /usr/local/cuda.
#
# tools/install_deps.sh installs nvidia-cuda-nvcc, -crt and nvidia-nvvm into the project's
# virtual environment next to the runtime, cuBLAS, cuDNN and NCCL wheels that PyTorch's
# wheel already brings. Together they hold a whole toolkit (nvidia/cu13/{bin,include,lib,
# nvvm}, nvidia/cudnn, nvidia/nccl), but in a layout CMake's FindCUDAToolkit does not take
# as one: the libraries carry only versioned names (libcudart.so.13, no libcudart.so, which
# find_library needs), and cuDNN's and NCCL's headers and libraries sit in directories of
# their own. dpt_cuda_toolkit_from_wheels() assembles, in the build tree, a toolkit of
# symbolic links to those files (bin, nvvm, include, lib and lib64) and returns its root (and
# the wheels' own library directories, for installed programs' run path), so the
# rest of the build finds CUDA there exactly as it would in /usr/local/cuda.
function(dpt_cuda_toolkit_from_wheels python out_root out_lib_dirs)
  set(${out_root} "" PARENT_SCOPE)
  set(${out_lib_dirs} "" PARENT_SCOPE)
  if(NOT python OR NOT EXISTS "${python}")
    return()
  endif()
  execute_process(COMMAND ${python} -c "import sysconfig, sys; sys.stdout.write(sysconfig.get_paths()['purelib'])"
                  OUTPUT_VARIABLE _site RESULT_VARIABLE _rc ERROR_QUIET)
  if(NOT _rc EQUAL 0)
    return()
  endif()
  # The newest CUDA major the wheels hold (nvidia/cu13, nvidia/cu12, ...).
  file(GLOB _nvccs "${_site}/nvidia/cu[0-9]*/bin/nvcc")
  if(NOT _nvccs)
    return()
  endif()
  list(SORT _nvccs COMPARE NATURAL ORDER DESCENDING)
  list(GET _nvccs 0 _nvcc)
  get_filename_component(_bin "${_nvcc}" DIRECTORY)
  get_filename_component(_cu "${_bin}" DIRECTORY)
  if(NOT EXISTS "${_cu}/nvvm/bin/cicc" OR NOT EXISTS "${_cu}/include/crt/host_config.h")
    message(STATUS "CUDA wheels in ${_site}: nvcc without nvidia-nvvm or nvidia-cuda-crt, not used")
    return()
  endif()

  set(_view "${CMAKE_BINARY_DIR}/cuda-from-wheels")
  file(REMOVE_RECURSE "${_view}")
  # lib: nvcc.profile links with -L$(TOP)/lib; lib64: where FindCUDAToolkit looks first.
  file(MAKE_DIRECTORY "${_view}/include" "${_view}/lib")
  file(CREATE_LINK "${_view}/lib" "${_view}/lib64" SYMBOLIC)
  file(CREATE_LINK "${_bin}" "${_view}/bin" SYMBOLIC)
  file(CREATE_LINK "${_cu}/nvvm" "${_view}/nvvm" SYMBOLIC)
  # Headers and libraries of the toolkit, then cuDNN's and NCCL's wheels (their own dirs).
  set(_lib_dirs "")
  foreach(_dir IN ITEMS "${_cu}" "${_site}/nvidia/cudnn" "${_site}/nvidia/nccl")
    if(IS_DIRECTORY "${_dir}/lib")
      list(APPEND _lib_dirs "${_dir}/lib")
    endif()
    file(GLOB _headers "${_dir}/include/*")
    foreach(_h IN LISTS _headers)
      get_filename_component(_name "${_h}" NAME)
      if(NOT EXISTS "${_view}/include/${_name}")
        file(CREATE_LINK "${_h}" "${_view}/include/${_name}" SYMBOLIC)
      endif()
    endforeach()
    file(GLOB _libs "${_dir}/lib/lib*")
    foreach(_l IN LISTS _libs)
      get_filename_component(_name "${_l}" NAME)
      file(CREATE_LINK "${_l}" "${_view}/lib/${_name}" SYMBOLIC)
      # libfoo.so.13 -> also libfoo.so, the name the linker and find_library look for.
      # (Two ifs: ${CMAKE_MATCH_1} in the same if() would still hold the previous match.)
      if(_name MATCHES "^(lib[^.]+\\.so)\\.[0-9]+$")
        set(_plain "${_view}/lib/${CMAKE_MATCH_1}")
        if(NOT EXISTS "${_plain}")
          file(CREATE_LINK "${_l}" "${_plain}" SYMBOLIC)
        endif()
      endif()
    endforeach()
  endforeach()
  set(${out_root} "${_view}" PARENT_SCOPE)
  set(${out_lib_dirs} "${_lib_dirs}" PARENT_SCOPE)
endfunction()

# CMake 3.25's FindCUDAToolkit sets a deprecation property on CUDA::nvToolsExt whenever the
# toolkit is 10.0 or newer, without checking that the library was found; CUDA 12+ (the
# wheels, and recent system toolkits) no longer ship libnvToolsExt, so configuring fails.
# An empty placeholder target lets it through; nothing here links nvToolsExt.
macro(dpt_cuda_placeholder_nvtoolsext)
  if(NOT TARGET CUDA::nvToolsExt)
    add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
  endif()
endmacro()
