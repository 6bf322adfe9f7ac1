# llama.cpp's multimodal library (tools/mtmd: mtmd, clip and its projector graphs), built here as a
# static library from the pinned llama.cpp's sources against the llama.cpp this build links: the
# install prefix (deps/llama/install) is built with LLAMA_BUILD_TOOLS=OFF, so it has no libmtmd, and
# a libmtmd built elsewhere may have been built with other flags. Nothing under deps/ is written.
# Without the sources (an install of your own and no source tree), specd builds without images
# (--mmproj then says so).
set(SPECD_MTMD_SOURCE_DIR "${CMAKE_CURRENT_SOURCE_DIR}/deps/llama/src" CACHE PATH
  "llama.cpp source tree whose tools/mtmd is built for images (the same release as LLAMA_CPP_DIR)")
set(SPECD_MTMD_DIR "${SPECD_MTMD_SOURCE_DIR}/tools/mtmd")
set(SPECD_HAVE_MTMD OFF)
if(EXISTS "${SPECD_MTMD_DIR}/mtmd.h" AND EXISTS "${SPECD_MTMD_SOURCE_DIR}/vendor/stb/stb_image.h")
  set(SPECD_HAVE_MTMD ON)
  set(V "${SPECD_MTMD_SOURCE_DIR}/vendor")
  file(GLOB SPECD_MTMD_MODELS "${SPECD_MTMD_DIR}/models/*.cpp")
  add_library(specd_mtmd STATIC
    ${SPECD_MTMD_DIR}/mtmd.cpp ${SPECD_MTMD_DIR}/mtmd-audio.cpp ${SPECD_MTMD_DIR}/mtmd-image.cpp
    ${SPECD_MTMD_DIR}/mtmd-helper.cpp ${SPECD_MTMD_DIR}/mtmd-helper-gen.cpp ${SPECD_MTMD_DIR}/clip.cpp
    ${SPECD_MTMD_MODELS}
    # mtmd's helpers hash images (vendor::hash in llama.cpp's own build)
    ${V}/hash/hash.cpp ${V}/hash/xxhash/xxhash.c ${V}/hash/sha1/sha1.c ${V}/hash/sha256/sha256.c)
  # sha1 lives in a C++ namespace (llama.cpp's vendor/hash/CMakeLists.txt does the same)
  set_source_files_properties(${V}/hash/sha1/sha1.c PROPERTIES LANGUAGE CXX)
  set_target_properties(specd_mtmd PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_STANDARD 17
    CXX_STANDARD_REQUIRED ON CXX_VISIBILITY_PRESET hidden)
  # third-party code: its warnings are not ours to fix
  target_compile_options(specd_mtmd PRIVATE -w)
  # mtmd-helper-gen.cpp includes "../src/llama-ext.h" (from the include/ directory's sibling)
  target_include_directories(specd_mtmd PUBLIC ${SPECD_MTMD_DIR}
    PRIVATE ${V} ${V}/hash ${SPECD_MTMD_SOURCE_DIR}/include)
  target_link_libraries(specd_mtmd PUBLIC llama Threads::Threads)
  message(STATUS "images (--mmproj): llama.cpp's mtmd from ${SPECD_MTMD_DIR}")
else()
  message(STATUS "images (--mmproj): no llama.cpp source tree at ${SPECD_MTMD_SOURCE_DIR} (tools/mtmd, vendor/): "
    "built without; -DSPECD_MTMD_SOURCE_DIR=<the llama.cpp source of LLAMA_CPP_DIR's release> adds them")
endif()
