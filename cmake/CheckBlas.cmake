# Debian's libtorch links libblas.so.3; with only netlib's reference BLAS behind that name a
# training step is ~26x slower. Refuse to build until OpenBLAS provides it (scripts/setup installs it).
execute_process(
  COMMAND update-alternatives --query libblas.so.3-x86_64-linux-gnu
  OUTPUT_VARIABLE _slapo_blas RESULT_VARIABLE _slapo_blas_rc ERROR_QUIET)
if(_slapo_blas_rc EQUAL 0)
  string(REGEX MATCH "Value: [^\n]*" _slapo_blas_value "${_slapo_blas}")
  if(NOT _slapo_blas_value MATCHES "openblas|blis|mkl")
    message(FATAL_ERROR "libtorch would run on the reference BLAS (${_slapo_blas_value}). "
      "Install libopenblas0-pthread (scripts/setup does) and configure again.")
  endif()
  message(STATUS "BLAS behind libblas.so.3: ${_slapo_blas_value}")
endif()
