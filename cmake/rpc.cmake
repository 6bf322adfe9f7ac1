# The JSON API (src/rpc, include/specd_rpc.h) and the server object under it (src/serve: typed
# requests, the scheduler, slots, jobs; no JSON) as their own library on top of libspecd, so the
# core needs no JSON library: libspecd-rpc (static for the specd program and the tests, shared for
# apps), and the drop-in compatibility library libspecd-rpcserver.so with the users' old C names.
# Both layers use libspecd's public API only (specd.h).
set(SPECD_RPC_SOURCES
  src/serve/fault.c
  src/serve/clock.c
  src/serve/request.c
  src/serve/request_images.c
  src/serve/lora.c
  src/serve/submit.c
  src/serve/reply.c
  src/serve/text_stream.c
  src/serve/origins.c
  src/serve/probs_window.c
  src/serve/history.c
  src/serve/metrics.c
  src/serve/heavy.c
  src/serve/job.c
  src/serve/run.c
  src/serve/scheduler.c
  src/serve/slot_call.c
  src/serve/server.c
  src/api/errors.c
  src/api/parse_error.c
  src/api/params.c
  src/rpc/rpc.c
  src/rpc/rpc_api.c
  src/api/watch.c
  src/api/init_args.c
  src/api/confine.c
  src/api/host.c
  src/api/host_load.c
  src/api/host_status.c
  src/api/completion.c
  src/api/request_json.c
  src/api/request_spec.c
  src/api/request_llama.c
  src/api/reply_json.c
  src/api/probs_json.c
  src/api/props.c
  src/api/slot_files.c
  src/rpc/methods_model.c
  src/rpc/methods_tokens.c
  src/api/embed_json.c
  src/api/rerank_json.c
  src/rpc/methods_embed.c
  src/rpc/methods_completion.c
  src/rpc/methods_lora.c
  src/api/request_lora.c
  src/api/invariance_json.c
  src/util/lora_arg.c
  src/util/base64.c
  src/util/flag_names.c
  src/rpc/abi.c
  src/api/json_schema.c
  src/api/json_schema_check.c
  src/api/json_schema_keywords.c
  src/api/json_schema_check_path.c
)
add_library(specd_rpc_objects OBJECT ${SPECD_RPC_SOURCES})
set_target_properties(specd_rpc_objects PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
target_include_directories(specd_rpc_objects PUBLIC include PRIVATE src)
target_compile_options(specd_rpc_objects PRIVATE ${SPECD_WARNINGS})
target_link_libraries(specd_rpc_objects PUBLIC PkgConfig::JANSSON Threads::Threads)

add_library(specd_rpc_static STATIC $<TARGET_OBJECTS:specd_rpc_objects>)
set_target_properties(specd_rpc_static PROPERTIES OUTPUT_NAME specd-rpc)
target_include_directories(specd_rpc_static PUBLIC include)
target_link_libraries(specd_rpc_static PUBLIC specd_static PkgConfig::JANSSON Threads::Threads)

add_library(specd_rpc_shared SHARED $<TARGET_OBJECTS:specd_rpc_objects>)
set_target_properties(specd_rpc_shared PROPERTIES OUTPUT_NAME specd-rpc VERSION ${PROJECT_VERSION}
  SOVERSION ${SPECD_SOVERSION})
target_include_directories(specd_rpc_shared PUBLIC include)
target_link_libraries(specd_rpc_shared PUBLIC specd_shared PRIVATE PkgConfig::JANSSON Threads::Threads)

# libspecd-rpcserver.so: the old names (include/rpcserver.h) over a private copy of libspecd, so
# an app relinks without code changes. A version script exports those names and nothing else:
# the engine's own specd_tokenize and llama.cpp's symbols stay inside.
add_library(specd_rpcserver SHARED src/rpc/rpcserver_compat.c)
set_target_properties(specd_rpcserver PROPERTIES OUTPUT_NAME specd-rpcserver LINKER_LANGUAGE CXX
  C_VISIBILITY_PRESET hidden)
target_include_directories(specd_rpcserver PRIVATE include)
target_compile_options(specd_rpcserver PRIVATE ${SPECD_WARNINGS})
target_link_libraries(specd_rpcserver PRIVATE specd_rpc_static
  "-Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/cmake/rpcserver.map")
set_target_properties(specd_rpcserver PROPERTIES LINK_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cmake/rpcserver.map)
