// The robust kernels for the avx2 level (flags set in robust/CMakeLists.txt). Eigen's namespace
// is renamed for this unit so that its template instantiations cannot be merged with those of
// another level at link time (they are compiled for different instruction sets).
#define Eigen ballot_eigen_avx2
#define BALLOT_ROBUST_ISA_NS avx2
#define BALLOT_ROBUST_LANES 8
#define BALLOT_ROBUST_ISA_NAME "avx2"
#include "robust/detail/isa_kernels.inc"
