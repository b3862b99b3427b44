# Finds the optional dependencies and records, for the configure summary, why each
# backend is or is not built.

find_package(MPI COMPONENTS C)
if(MPI_C_FOUND)
  set(DPT_HAVE_MPI ON)
  set(DPT_MPI_REASON "found MPI ${MPI_C_VERSION} at ${MPI_C_LIBRARIES}")
  string(REGEX REPLACE "\n.*" "" DPT_MPI_REASON "${DPT_MPI_REASON}")
else()
  set(DPT_HAVE_MPI OFF)
  set(DPT_MPI_REASON "no MPI found (apt-get install libopenmpi-dev)")
endif()

set(DPT_HAVE_CUDA OFF)
set(DPT_HAVE_NCCL OFF)
set(DPT_CUDA_REASON "disabled with DPT_WITH_CUDA=OFF")
set(DPT_NCCL_REASON "needs CUDA")
if(NOT DPT_WITH_CUDA STREQUAL "OFF")
  include(dpt_cuda_wheels)
  set(_dpt_cuda_where "/usr/local/cuda")
  if(EXISTS /usr/local/cuda AND NOT CUDAToolkit_ROOT)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  elseif(NOT CUDAToolkit_ROOT)
    # No system toolkit: NVIDIA's wheels in DPT_PYTHON's environment (dpt_cuda_wheels.cmake).
    dpt_cuda_toolkit_from_wheels("${DPT_PYTHON}" _dpt_wheel_cuda _dpt_wheel_lib_dirs)
    if(_dpt_wheel_cuda)
      set(CUDAToolkit_ROOT "${_dpt_wheel_cuda}")
      set(_dpt_cuda_from " from NVIDIA's wheels")
      # nvcc links from this directory itself, so CMake counts it as implicit and writes no
      # run path to it: without these, a program finds libcudart.so.13 only by the luck of
      # which of our libraries the loader opens first. Installed programs point at the
      # wheels themselves (the build tree's links may be gone).
      list(APPEND CMAKE_BUILD_RPATH "${_dpt_wheel_cuda}/lib")
      list(APPEND CMAKE_INSTALL_RPATH ${_dpt_wheel_lib_dirs})
    endif()
    set(_dpt_cuda_where "/usr/local/cuda and ${DPT_PYTHON}'s nvidia-cuda-nvcc wheels")
  endif()
  dpt_cuda_placeholder_nvtoolsext()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    # The kernels need nvcc; the architectures default to Ampere and Hopper (sm_80,
    # sm_90). Override with -DCMAKE_CUDA_ARCHITECTURES=... for other GPUs.
    if(NOT CMAKE_CUDA_COMPILER AND EXISTS "${CUDAToolkit_BIN_DIR}/nvcc")
      set(CMAKE_CUDA_COMPILER "${CUDAToolkit_BIN_DIR}/nvcc")
    endif()
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    include(CheckLanguage)
    check_language(CUDA)
  endif()
  if(CUDAToolkit_FOUND AND CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 dialect flags for nvcc
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(DPT_HAVE_CUDA ON)
    # Our shared libraries link the CUDA runtime privately; a program linking them needs the
    # linker to find libcudart.so.13 all the same, which only works by itself where the
    # toolkit's lib directory is in ld.so.conf (a system install), not for the wheels' one.
    add_link_options("LINKER:-rpath-link,${CUDAToolkit_LIBRARY_DIR}")
    set(DPT_CUDA_REASON "found CUDA ${CUDAToolkit_VERSION}${_dpt_cuda_from} in ${CUDAToolkit_LIBRARY_DIR} (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, sm ${CMAKE_CUDA_ARCHITECTURES})")
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(DPT_HAVE_NCCL ON)
      set(DPT_NCCL_REASON "found ${NCCL_LIBRARY}")
    else()
      set(DPT_NCCL_REASON "nccl.h / libnccl not found next to CUDA")
    endif()
  elseif(CUDAToolkit_FOUND)
    set(DPT_CUDA_REASON "CUDA toolkit found but no usable nvcc")
  else()
    set(DPT_CUDA_REASON "no CUDA toolkit found (looked in ${_dpt_cuda_where})")
  endif()
  if(DPT_WITH_CUDA STREQUAL "ON" AND NOT DPT_HAVE_CUDA)
    message(FATAL_ERROR "DPT_WITH_CUDA=ON but ${DPT_CUDA_REASON}")
  endif()
endif()
