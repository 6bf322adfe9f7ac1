# The JSON-RPC layer of libspecd (src/rpc): built into libspecd itself, and into the drop-in
# compatibility library libspecd-rpcserver.so that exports the users' old C names.
set(SPECD_RPC_SOURCES
  src/rpc/params.c
  src/rpc/rpc.c
  src/rpc/init_args.c
  src/rpc/state.c
  src/rpc/completion_request.c
  src/rpc/completion.c
  src/rpc/completion_probs.c
  src/rpc/async.c
  src/rpc/abi.c
  src/rpc/json_schema.c
  src/rpc/json_schema_object.c
  src/rpc/json_schema_rules.c
  src/rpc/json_schema_int.c
)
target_sources(specd_objects PRIVATE ${SPECD_RPC_SOURCES})
target_link_libraries(specd_objects PUBLIC PkgConfig::JANSSON)

# libspecd-rpcserver.so: the old names (include/rpcserver.h) over a private copy of libspecd, so
# an app relinks without code changes. A version script exports those names and nothing else:
# the engine's own specd_tokenize and llama.cpp's symbols stay inside.
add_library(specd_rpcserver SHARED src/rpc/rpcserver_compat.c)
set_target_properties(specd_rpcserver PROPERTIES OUTPUT_NAME specd-rpcserver LINKER_LANGUAGE CXX
  C_VISIBILITY_PRESET hidden)
target_include_directories(specd_rpcserver PRIVATE include)
target_compile_options(specd_rpcserver PRIVATE ${SPECD_WARNINGS})
target_link_libraries(specd_rpcserver PRIVATE specd_static
  "-Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/cmake/rpcserver.map")
set_target_properties(specd_rpcserver PROPERTIES LINK_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cmake/rpcserver.map)
