# Sourced by the build scripts: compile through ccache when it is installed. The base directory
# makes cached paths relative to the repository, so a fresh clone on the same machine (CI) hits
# the cache of earlier builds. CMake reads the launcher variables at a build tree's first configure.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
