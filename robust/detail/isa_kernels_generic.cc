// The robust kernels for the generic level (flags set in robust/CMakeLists.txt). Eigen's namespace
// is renamed for this unit so that its template instantiations cannot be merged with those of
// another level at link time (they are compiled for different instruction sets).
#define Eigen ballot_eigen_generic
#define BALLOT_ROBUST_ISA_NS generic
#define BALLOT_ROBUST_LANES 4
#define BALLOT_ROBUST_ISA_NAME "generic"
#include "robust/detail/isa_kernels.inc"
