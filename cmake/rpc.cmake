# The JSON-RPC layer of libspecd (src/rpc): built into libspecd itself, and into the drop-in
# compatibility library libspecd-rpcserver.so that exports the users' old C names.
set(SPECD_RPC_SOURCES
  src/rpc/params.c
  src/rpc/rpc.c
  src/rpc/init_args.c
  src/rpc/state.c
  src/rpc/completion_request.c
  src/rpc/completion.c
  src/rpc/async.c
  src/rpc/abi.c
)
add_library(specd_rpc_objects OBJECT ${SPECD_RPC_SOURCES})
set_target_properties(specd_rpc_objects PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
target_include_directories(specd_rpc_objects PUBLIC include PRIVATE src)
target_compile_options(specd_rpc_objects PRIVATE ${SPECD_WARNINGS})
target_link_libraries(specd_rpc_objects PUBLIC PkgConfig::JANSSON Threads::Threads)
