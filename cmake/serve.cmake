# `specd serve` (src/server): the JSON API over HTTP with libmicrohttpd, part of the specd program.
pkg_check_modules(MICROHTTPD REQUIRED IMPORTED_TARGET libmicrohttpd)
target_sources(specd PRIVATE src/server/http.c src/server/routes.c src/server/llama_routes.c src/server/calls.c src/server/sse.c
  src/server/conn.c src/server/query_args.c src/server/memory.c src/server/page.c src/server/openai.c src/server/openai_request.c src/server/openai_messages.c src/server/image_parts.c src/server/openai_chat.c src/server/anthropic.c src/server/anthropic_reply.c src/server/responses.c src/server/responses_reply.c src/server/infill.c src/server/embeddings.c src/server/openai_reply.c src/server/openai_choices.c src/server/completion_call.c src/server/setup_call.c src/server/completion_outputs.c src/server/respond.c src/server/stop.c ${CMAKE_CURRENT_BINARY_DIR}/generated/page_html.c)
# The page at GET / (src/server/page.html), embedded in the binary.
add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/generated/page_html.c
  COMMAND ${CMAKE_COMMAND} -DIN=${PROJECT_SOURCE_DIR}/src/server/page.html
          -DOUT=${CMAKE_CURRENT_BINARY_DIR}/generated/page_html.c -DNAME=specd_page_html
          -P ${PROJECT_SOURCE_DIR}/cmake/embed.cmake
  DEPENDS ${PROJECT_SOURCE_DIR}/src/server/page.html ${PROJECT_SOURCE_DIR}/cmake/embed.cmake
  COMMENT "Embedding the server's page")
target_link_libraries(specd PRIVATE PkgConfig::MICROHTTPD)
